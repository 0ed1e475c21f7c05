// Warp-level tensor-core pieces shared by the GEMM (linear/quant_gemm.cuh), the attention core
// (attention/attend_tc.cu) and the FP8 GEMV (linear/fp8_gemv_tc.cu): mma.sync m16n8k16 bf16 / f16
// with fp32 accumulation, and the ldmatrix loads of its fragments. sm_80+, so the same code serves
// sm_90 (H200) and sm_121 (GB10, which has no wgmma).
//
// Fragment layout (PTX ISA "mma.m16n8k16", g = lane / 4, t = lane % 4):
//   A 16 × 16 row-major: a0 (row g, k 2t..2t+1), a1 (row g+8, same k), a2 (row g, k 8+2t..),
//                        a3 (row g+8, k 8+2t..)
//   B 16 × 8 (k × n):    b0 (k 2t..2t+1, col g), b1 (k 8+2t.., col g)
//   C 16 × 8:            c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8, same cols)
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace dsv41::kernels::detail {

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same shape with f16 operands (fp8_gemv_tc: e4m3 weights convert exactly to f16).
__device__ __forceinline__ void mma_f16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t lds32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Four 8 × 8 b16 matrices; lanes 8i .. 8i + 7 give the 16-byte row addresses of matrix i, and
// register i of lane l holds row l / 4, elements 2(l % 4), 2(l % 4) + 1 of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same with each matrix transposed (register i of lane l: column l / 4, rows 2(l % 4) ..).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

}  // namespace dsv41::kernels::detail
