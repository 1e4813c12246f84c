  // Softmax kinds over the channels of a channels-last input (a cuDNN NHWC / NDHWC conv output):
  // their own kernel (softmax_nhwc.cu) when every other operand is constant along the spatial
  // dims and the channels fit its block; else a contiguous copy for the column kernels, which
  // would read it through general strides (an index division a value).
  const bool sm_channels_last = nd >= 3 && dim == 1 && count == 1 &&
      ks_channels_last_operand({&in_0}, in_0.sizes()) == 0;
  const bool sm_nhwc = sm_channels_last && x_sizes[1] <= KS_SOFTMAX_NHWC_MAX_C && x_sizes[0] <= 65535 &&
      ks_softmax_nhwc_smem(x_sizes[1], {{nepi}}) <= 48 * 1024{{constant_checks}};  // the default dynamic limit
  if (sm_channels_last && !sm_nhwc) in_0 = in_0.contiguous();
  if (sm_nhwc) {  // small (constant along S): contiguous, so described per channel, not by strides
{{small_contiguous}}
  }
