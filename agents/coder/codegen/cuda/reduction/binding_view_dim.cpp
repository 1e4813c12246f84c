  int64_t dim = {{dim}};
  if (nd == 0) {
    TORCH_CHECK(dim == 0 || dim == -1, "{{name}}: dim ", ks_str(dim), " out of range for a 0-d tensor");
  } else {
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "{{name}}: dim {{dim}} out of range for a ", ks_str(nd), "-d tensor");
    for (int64_t k = 0; k < dim; ++k) outer *= x_sizes[k];
    R = x_sizes[dim];
    for (int64_t k = dim + 1; k < nd; ++k) inner *= x_sizes[k];
    {{out_shape}}
  }
