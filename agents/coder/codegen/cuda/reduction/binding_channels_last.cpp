  // A channels-last input (a cuDNN NHWC / NDHWC conv output) viewed with its channels last,
  // [N, S..., C], where the reduced dims stay one run there and the result keeps its order:
  // over the channels alone, rows of [N * S, C] (not a column reduction read C elements apart);
  // over every spatial dim (global pooling), [N, S, C] columns read 32 channels a warp, the
  // result one value an (n, c) as contiguous [N, C] wants; over all but the batch dim, rows of
  // S * C values.  The operands read with the input (xs) are viewed the same way; those of the
  // epilogue (os) keep the output's shape.  The columns need the column kernels: a build over
  // the trailing dims has none (spec.trailing), and reads such an input through its strides.
  if (nd >= 3 && ks_channels_last_operand({&in_0}, in_0.sizes()) == 0 &&
      ((dim == 1 && (count == 1 || count == nd - 1)){{spatial}})) {
    {{permute}}
    x_sizes.push_back(x_sizes[1]);
    x_sizes.erase(x_sizes.begin() + 1);
    const int64_t first = (dim == 1 && count == 1) ? nd - 1 : 1;  // the reduced run, in the view
    outer = 1; R = 1; inner = 1;
    for (int64_t k = 0; k < first; ++k) outer *= x_sizes[k];
    for (int64_t k = first; k < first + count; ++k) R *= x_sizes[k];
    for (int64_t k = first + count; k < nd; ++k) inner *= x_sizes[k];
  }
