#ifndef KS_ATTENTION_MMA_H
#define KS_ATTENTION_MMA_H
// Warp-level tensor-core products (mma.sync, sm_80 and later) for the attention kernel: fragment
// layouts are PTX's for m16n8k8 (tf32) and m16n8k16 (f16 / bf16), row-major A, column-major B,
// fp32 accumulators.  Lane = 4 g + t: the accumulator c[0..1] is row g, columns 2t and 2t + 1,
// c[2..3] row g + 8, the same columns.

// The element a kernel keeps in shared memory for each math: fp32 rounded to tf32, or 16 bits.
template <int KIND> struct KsMmaElem;
template <> struct KsMmaElem<0> { using T = float; };
template <> struct KsMmaElem<1> { using T = __half; };
template <> struct KsMmaElem<2> { using T = __nv_bfloat16; };

// fp32 -> tf32, rounded to nearest (ties away), as cuBLAS rounds its tf32 inputs; kept as fp32 bits
__device__ __forceinline__ float ks_round_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}
template <int KIND> __device__ __forceinline__ typename KsMmaElem<KIND>::T ks_mma_elem(float x);
template <> __device__ __forceinline__ float ks_mma_elem<0>(float x) { return ks_round_tf32(x); }
template <> __device__ __forceinline__ __half ks_mma_elem<1>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 ks_mma_elem<2>(float x) { return __float2bfloat16_rn(x); }
// Two fp32 values as one 32-bit A register of a 16-bit product (lo: the lower column)
template <int KIND> __device__ __forceinline__ uint32_t ks_mma_pack(float lo, float hi);
template <> __device__ __forceinline__ uint32_t ks_mma_pack<1>(float lo, float hi) {
  return ks_pack2(__float2half_rn(lo), __float2half_rn(hi));
}
template <> __device__ __forceinline__ uint32_t ks_mma_pack<2>(float lo, float hi) {
  return ks_pack2(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}

// c += a b over k = 8 (tf32) or k = 16 (f16 / bf16)
template <int KIND> __device__ __forceinline__ void ks_mma(float* c, const uint32_t* a, const uint32_t* b);
template <> __device__ __forceinline__ void ks_mma<0>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void ks_mma<1>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void ks_mma<2>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four 8 x 8 matrices of 16-bit elements, transposed on the way (the B operand of a product
// over rows of a row-major tile); lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ks_ldmatrix_x4_trans(uint32_t* r, const void* row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
#endif
