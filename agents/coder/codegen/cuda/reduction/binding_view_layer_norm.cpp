  TORCH_CHECK(nd >= {{norm_ndim}}, "{{name}}: layer_norm over {{norm_ndim}} dims of a ", ks_str(nd), "-d tensor");
  const int64_t split = nd - {{norm_ndim}};
  for (int64_t k = 0; k < split; ++k) outer *= x_sizes[k];
  for (int64_t k = split; k < nd; ++k) R *= x_sizes[k];
  out_shape = x_sizes;
