
  if (plan.path == KS_PATH_COLS) plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {{nf}}, normalizing, rows32, true);
