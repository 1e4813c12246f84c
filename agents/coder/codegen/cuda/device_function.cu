__device__ __forceinline__ void {{name}}({{params}}) {
{{body}}
}

