if (plan.nhwc_out) {
      if (lanes_p == 2) KS_GN_NHWC_APPLY(true, 2);
      else if (lanes_p == 4) KS_GN_NHWC_APPLY(true, 4);
      else KS_GN_NHWC_APPLY(true, 1);
    } else 