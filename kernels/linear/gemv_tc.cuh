// Shared pieces of the tensor-core GEMVs (linear/fp8_gemv_tc.cu, moe/moe_grouped_fp4_gemv_tc.cu):
// the x split both read their B fragments from, and the weight-stream load.
//
// x split: x [rows, cols] fp32 -> per (row, 32-column block) a power-of-two factor 2^e that
// brings the block's largest |x| into [2^14, 2^15) (f16's range), and x · 2^-e as three f16
// parts hi + mid + lo (33 significant bits: exact unless a part falls below f16's subnormal
// range, i.e. elements below ~2^-38 of their block maximum). Layout: xq [rows][blocks][3][32]
// f16, then xf [rows][blocks] fp32 (= 2^e). Within each 8 columns the halves are in column order
// (FP8: lane t's MMA m takes columns 8t + 4m .. 8t + 4m + 3) or, with pair_order, in the order
// 0, 4, 1, 5, 2, 6, 3, 7 (FP4: one nibble-pair decode yields columns c and c + 4).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/launch.cuh"
#include "common/mma_sync.cuh"

namespace dsv41::kernels::detail {

inline constexpr int kGemvTcParts = 3;

inline size_t gemv_tc_xq_bytes(int64_t rows, int64_t blocks) {
  return static_cast<size_t>(rows) * blocks * kGemvTcParts * 64;
}
inline size_t gemv_tc_split_bytes(int64_t rows, int64_t blocks) {
  return gemv_tc_xq_bytes(rows, blocks) + static_cast<size_t>(rows) * blocks * 4;
}

// The split of x [rows, cols] (cols % 32 == 0, x 16-byte aligned) into `workspace`
// (gemv_tc_split_bytes(rows, cols / 32) bytes, 16-byte aligned); defined in fp8_gemv_tc.cu.
cudaError_t gemv_tc_split(const float* x, int64_t rows, int64_t cols, bool pair_order,
                          void* workspace, cudaStream_t stream);

// 8 bytes through L2 only (the weight stream is read once).
__device__ __forceinline__ uint2 load_stream_u2(const uint8_t* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p));
  return v;
}

// v[i] · down as kGemvTcParts f16 parts, largest first (each the f16 rounding of what the earlier
// parts left), written as 16 bytes per part: part[p] register j holds values 2j, 2j + 1. Shared by
// the split kernel below and the per-block split of moe_grouped_fp4_gemv_tc_decode.
__device__ __forceinline__ void gemv_tc_split8(const float (&v)[8], float down,
                                               uint4 (&part)[kGemvTcParts]) {
  uint32_t w[kGemvTcParts][4];
#pragma unroll
  for (int i = 0; i < 8; i += 2) {
    float r0 = v[i] * down, r1 = v[i + 1] * down;
#pragma unroll
    for (int p = 0; p < kGemvTcParts; ++p) {
      const __half2 h = __floats2half2_rn(r0, r1);
      w[p][i / 2] = *reinterpret_cast<const uint32_t*>(&h);
      const float2 back = __half22float2(h);
      r0 -= back.x;
      r1 -= back.y;
    }
  }
#pragma unroll
  for (int p = 0; p < kGemvTcParts; ++p) part[p] = make_uint4(w[p][0], w[p][1], w[p][2], w[p][3]);
}

// One thread per (row, block, quarter of 8 columns); the 4 quarters of a block are adjacent
// lanes (a group of 4 is never split: blockDim and the total are multiples of 4).
template <bool kPairOrder>
__global__ void __launch_bounds__(256)
    gemv_tc_split_kernel(const float* __restrict__ x, int64_t rows, int64_t cols,
                         __half* __restrict__ xq, float* __restrict__ xf) {
  pdl_begin();
  const int64_t blocks = cols / 32;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Lanes past the end stay for the shuffles.
  const bool live = idx < rows * blocks * 4;
  const int q = static_cast<int>(idx & 3);
  const int64_t rb = idx >> 2, r = rb / blocks, b = rb - r * blocks;
  float v[8];
  if (live) {
    const float4* p = reinterpret_cast<const float4*>(x + r * cols + b * 32 + 8 * q);
    const float4 a = __ldg(p), c = __ldg(p + 1);
    if (kPairOrder) {
      v[0] = a.x, v[1] = c.x, v[2] = a.y, v[3] = c.y, v[4] = a.z, v[5] = c.z, v[6] = a.w,
      v[7] = c.w;
    } else {
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z,
      v[7] = c.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = 0.0f;
  }
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(v[i]));
  m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
  m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
  // m in [2^E, 2^(E+1)) -> e = E - 14 puts m · 2^-e in [2^14, 2^15) (f16 max 65504); clamped so
  // both 2^e and 2^-e are normal floats (a block below 2^-86 keeps fewer bits: < 2^-100 absolute).
  const int E = ((__float_as_int(m) >> 23) & 0xFF) - 127;
  const int e = m == 0.0f ? 0 : max(-100, min(113, E - 14));
  const float down = __int_as_float((127 - e) << 23);
  uint4 part[kGemvTcParts];
  gemv_tc_split8(v, down, part);
  if (!live) return;
  uint4* dst = reinterpret_cast<uint4*>(xq + ((r * blocks + b) * kGemvTcParts) * 32 + 8 * q);
#pragma unroll
  for (int p = 0; p < kGemvTcParts; ++p) dst[p * 4] = part[p];
  if (q == 0) xf[r * blocks + b] = __int_as_float((127 + e) << 23);
}

// One 32-column block of a warp tile against one 8-row x tile: d[i] = Σ_parts A_i · B_part over
// the block (MMA m = 0 takes B's .x/.y, m = 1 its .z/.w: the split's order), smallest part first.
// xp: this lane's 8 halves of part 0 (parts 4 uint4 apart); live: the lane's x row exists (else
// its B columns are zero).
template <int kMT>
__device__ __forceinline__ void gemv_tc_block_mma(const uint32_t (&a)[kMT][2][4], const uint4* xp,
                                                  bool live, float (&d)[kMT][4]) {
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) d[i][c] = 0.0f;
#pragma unroll
  for (int p = kGemvTcParts - 1; p >= 0; --p) {
    const uint4 b = live ? __ldg(xp + p * 4) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
      mma_f16_16816(d[i], a[i][0], b.x, b.y);
      mma_f16_16816(d[i], a[i][1], b.z, b.w);
    }
  }
}

// The end of a tensor-core GEMV warp tile (kMT MMA tiles of 16 weight rows from o0, kNT tiles of 8
// x rows): the S k slices of the tile (warps warp - slice .. of the block) are summed in slice
// order through `red`, then slice 0 stores the C fragments of x rows < rows and outputs < out at
// y[r · out + o]. Every warp of the block calls it last (one barrier when S > 1).
template <int kMT, int kNT>
__device__ __forceinline__ void gemv_tc_finish(float (&acc)[kMT][kNT][4],
                                               float (*red)[kMT][kNT][4][32], int S, int slice,
                                               int64_t o0, int rows, int64_t out, float* y) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  if (S > 1) {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) red[warp][i][n][c][lane] = acc[i][n][c];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float s = red[warp][i][n][c][lane];
          for (int j = 1; j < S; ++j) s += red[warp + j][i][n][c][lane];
          acc[i][n][c] = s;
        }
  }
  if (o0 >= out) return;
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = 8 * n + 2 * t + (c & 1);
        const int64_t o = o0 + 16 * i + g + 8 * (c >> 1);
        if (r < rows && o < out) y[r * out + o] = acc[i][n][c];
      }
}

}  // namespace dsv41::kernels::detail
