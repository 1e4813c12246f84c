  // Short softmax columns: a thread per column with its values in registers (reduction/colreg.cu).
  if ((plan.path == KS_PATH_COLS || plan.path == KS_PATH_TILE) && inner >= 32 && R <= KS_COLREG_MAX_R) {
    plan.path = KS_PATH_COLREG;
    plan.threads_x = 256;
    plan.threads_y = 1;
    plan.splits = 1;
    plan.r_per_split = R;
    plan.workspace_floats = 0;
  }
