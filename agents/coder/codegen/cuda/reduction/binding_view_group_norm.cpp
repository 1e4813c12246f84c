  // group_norm: [N, C, S...] as N * G rows of C / G * prod(S) values (each channel group is
  // contiguous); the per-channel weight / bias are read as [C, 1, ...] against the input's shape.
  TORCH_CHECK(nd >= 2, "{{name}}: group_norm of a ", ks_str(nd), "-d tensor (expected [N, C, *])");
  const int64_t channels = x_sizes[1];
  TORCH_CHECK(channels % {{groups}} == 0, "{{name}}: ", ks_str(channels), " channels in {{groups}} groups");
  int64_t gn_span = 1;  // contiguous values per channel
  for (int64_t k = 2; k < nd; ++k) gn_span *= x_sizes[k];
  outer = x_sizes[0] * {{groups}};
  R = channels / {{groups}} * gn_span;
  out_shape = x_sizes;
  std::vector<int64_t> affine_shape(nd - 1, 1);
  affine_shape[0] = channels;
{{affine_views}}
  // A channels-last input (a cuDNN NHWC / NDHWC conv output): the NHWC kernels (gn_nhwc.cu) when
  // every other operand is constant along the spatial dims and the channels fit the statistics
  // kernel's block; else a contiguous copy for the kernels below (which would read it through
  // general strides, an index division per value).
  bool gn_nhwc = false;
  if (nd >= 3 && ks_channels_last_operand({&in_0}, in_0.sizes()) == 0) {
    gn_nhwc = channels <= KS_GN_NHWC_MAX_C && x_sizes[0] <= 65535{{constant_checks}};
    if (!gn_nhwc) in_0 = in_0.contiguous();
  }
  if (gn_nhwc) {  // small (constant along S): contiguous, so described per channel, not by strides
{{small_contiguous}}
  }
