  int64_t dim = {{dim}};
  const int64_t count = {{count}};  // consecutive dims reduced from `dim` on (one R)
  if (nd == 0) {
    TORCH_CHECK(count == 1 && (dim == 0 || dim == -1), "{{name}}: dim ", ks_str(dim), " out of range for a 0-d tensor");
  } else {
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim + count <= nd, "{{name}}: dims {{dim}}..{{dim}}+", ks_str(count - 1),
                " out of range for a ", ks_str(nd), "-d tensor");
    for (int64_t k = 0; k < dim; ++k) outer *= x_sizes[k];
    R = 1;
    for (int64_t k = dim; k < dim + count; ++k) R *= x_sizes[k];
    for (int64_t k = dim + count; k < nd; ++k) inner *= x_sizes[k];
    {{out_shape}}
  }
{{channels_last}}