
  // Kept channels-last (agents/coder/layout.py): with every 4-5-D input stored channels-last (or
  // constant along the spatial dims), the concatenation along the channels runs on the views
  // with the channels last, along their last dim (a row of each input's channels per position),
  // and the result, [N, S..., C] contiguous, is moved back: a channels-last [N, C, S...] tensor.
  const int64_t cl_rank = in_0.dim();
  const bool cat_cl = ks_inputs_channels_last({{{in_refs}}}, cl_rank);
  if (cat_cl) {
{{permute}}
  }