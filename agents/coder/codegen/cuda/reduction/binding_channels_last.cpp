  // A channels-last input (a cuDNN NHWC / NDHWC conv output) reduced over its channels alone:
  // in memory each position's channels are one contiguous row, so this is a row reduction over
  // [N * S, C] instead of a column reduction read C elements apart, and its output, one value a
  // position in [N, S...] order, is the contiguous result.  The operands read with the input
  // (xs) are viewed the same way; those of the epilogue (os) keep the output's shape.
  if (nd >= 3 && dim == 1 && count == 1 && ks_channels_last_operand({&in_0}, in_0.sizes()) == 0) {
    {{permute}}
    x_sizes.erase(x_sizes.begin() + 1);
    x_sizes.push_back(R);
    outer *= inner;
    inner = 1;
  }
