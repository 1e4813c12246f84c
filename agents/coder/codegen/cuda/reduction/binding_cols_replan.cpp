
  if (plan.path == KS_PATH_COLS || plan.path == KS_PATH_COLREG || plan.path == KS_PATH_COLLOOP) plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {{nf}}, normalizing, rows32, true);
