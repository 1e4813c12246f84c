{{pro}}

// The {{what}} value at index i: every input read through its descriptor, then the prologue.
__device__ __forceinline__ float {{name}}_value({{value_params}}, const int64_t i) {
  {{loads}}
  float v;
  {{name}}_pro({{pro_args}}, v);
  return v;
}
