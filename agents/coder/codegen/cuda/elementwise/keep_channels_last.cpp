
  // The program keeps this output channels-last (agents/coder/layout.py): with every full-size
  // operand channels-last, the kernel runs once on the views with the channels last, [N, S..., C]
  // (plain contiguous tensors then, per-channel operands broadcast along the last dim), and the
  // result is that view's permutation back, a channels-last [N, C, S...] tensor: no transpose.
  if (shape.size() >= 4 && shape.size() <= 5 && ks_full_channels_last({{{in_refs}}}, c10::IntArrayRef(shape))) {
    const int64_t nd = (int64_t)shape.size();
    return {{name}}({{permuted}}).movedim(-1, 1);
  }