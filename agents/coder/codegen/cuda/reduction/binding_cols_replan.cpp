
  if (plan.path == KS_PATH_COLS || plan.path == KS_PATH_COLREG) plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {{nf}}, normalizing, rows32, true);
