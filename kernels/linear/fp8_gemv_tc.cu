// Tensor-core FP8 GEMV for 1..16 rows (decode steps and DSpark verify batches): the weights go
// through mma.sync m16n8k16 as exact f16 (one cvt per two e4m3 codes) instead of being widened to
// fp32 and multiplied on the CUDA cores (quant_gemv.cuh: ~10 instructions per weight byte, issue
// bound at 47 % of the H200's bandwidth for one row and 5 % for 16, docs/perf.md).
//
// Two launches:
//  1. fp8_gemv_split: x [rows, cols] fp32 -> per (row, 32-column block): a power-of-two factor
//     2^e that brings the block's largest |x| into [2^14, 2^15), and x · 2^-e as three f16 parts
//     hi + mid + lo (33 significant bits: the split of an fp32 is exact unless a part falls below
//     f16's subnormal range, i.e. elements below ~2^-38 of their block maximum). Rows rows..15 of
//     the padded tile are zero with factor 0.
//  2. fp8_gemv_tc: a warp owns 32 weight rows (two MMA tiles of 16) over a k slice; per 32-column
//     block each lane loads 8 bytes of four rows, and the 4 lanes of a row group cover the block,
//     so the block's scale byte and each x row's factor apply to the block's partial product (D =
//     Σ_parts A·B_part, then acc += D · scale · factor). The MMA's k order within a block is a
//     fixed permutation of the columns, applied to W and x alike: lane t's 8 bytes are columns 8t
//     .. 8t + 7, of which MMA m takes 8t + 4m .. 8t + 4m + 3 as logical k 2t, 2t + 1, 8 + 2t, 9 +
//     2t. The S k slices of a tile run in S warps of one block and are summed in slice order
//     through shared memory, so results are deterministic for a given shape.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "common/launch.cuh"
#include "common/mma_sync.cuh"
#include "dsv41k/launchers.hpp"
#include "linear/gemv_tc.cuh"
#include "linear/quant_gemv.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kParts = detail::kGemvTcParts;
constexpr int kRowsMax = 16;  // rows of one call (the MMA's N is 8; rows 8..15 a second MMA)
// Warps wanted in flight over the grid (~16 per SM on the H200's 132 SMs) when choosing the k
// split.
constexpr int64_t kTargetWarps = 2048;

__device__ __forceinline__ uint32_t e4m3x2_to_half2(uint32_t two) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu), __NV_E4M3);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// kNT: x row tiles of 8 (1: rows <= 8, 2: rows <= 16). A warp owns kMT = 2 MMA tiles of 16
// weight rows (32 rows: one FP8 scale row block), so each x fragment it loads serves two MMAs
// (the x parts are 6 bytes per column and row against 32 weight bytes per column). Only lanes of
// real x rows load x (padded rows are zero registers). Grid: blocks of 8 / S warp tiles × S slices.
// Group g of the block-diagonal form: weight rows [g·out, (g + 1)·out), x columns [g·in, ...).
constexpr int kMT = 2;
template <int kNT>
__global__ void __launch_bounds__(kThreads, 2)
    fp8_gemv_tc_kernel(const __half* __restrict__ xq, const float* __restrict__ xf,
                       const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale,
                       float* __restrict__ y, int rows, int groups, int64_t out, int64_t in,
                       int S) {
  detail::pdl_begin();
  __shared__ float red[8][kMT][kNT][4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t total = out * groups;  // weight rows
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (8 / S) + warp / S;
  const int slice = warp % S;
  const int64_t o0 = tile * 16 * kMT;
  const int64_t nkb = in / 32, x_blocks = nkb * groups;
  float acc[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][n][c] = 0.0f;
  if (o0 < total) {
    const int64_t grp = o0 / out;  // out % 32 == 0 when groups > 1: a warp tile is in one group
    const uint8_t* wr[kMT][2];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        wr[i][h] = w + min(o0 + 16 * i + 8 * h + g, total - 1) * in + 8 * t;
    const uint8_t* sp = scale + (o0 / 32) * nkb;
    const int64_t kb0 = slice * nkb / S, kb1 = (slice + 1) * nkb / S;
    const __half* xbase = xq + (grp * nkb) * kParts * 32 + 8 * t;
    const float* fbase = xf + grp * nkb;
    // 32-column blocks whose weights are in flight together (2 blocks of 8 warps per SM: 16
    // warps × kU × 1 KB; 16 rows hold twice the fragments, so fewer blocks there).
    constexpr int kU = kNT == 1 ? 4 : 2;
    for (int64_t kb = kb0; kb < kb1; kb += kU) {
      uint2 q[kU][kMT][2];
      float sw[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t k = min(kb + u, kb1 - 1);  // a repeated block is loaded, never added
#pragma unroll
        for (int i = 0; i < kMT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) q[u][i][h] = detail::load_stream_u2(wr[i][h] + k * 32);
        sw[u] = detail::e8m0_to_float(__ldg(sp + k));
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if (kb + u >= kb1) break;
        uint32_t a[kMT][2][4];
#pragma unroll
        for (int i = 0; i < kMT; ++i)
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            const uint32_t lo = m ? q[u][i][0].y : q[u][i][0].x;
            const uint32_t hi = m ? q[u][i][1].y : q[u][i][1].x;
            a[i][m][0] = e4m3x2_to_half2(lo);
            a[i][m][1] = e4m3x2_to_half2(hi);
            a[i][m][2] = e4m3x2_to_half2(lo >> 16);
            a[i][m][3] = e4m3x2_to_half2(hi >> 16);
          }
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
          const int xr = 8 * n + g;  // the B operand's column = x row
          const bool live = xr < rows;
          const uint4* xp =
              reinterpret_cast<const uint4*>(xbase + (xr * x_blocks + kb + u) * kParts * 32);
          float d[kMT][4];
          detail::gemv_tc_block_mma<kMT>(a, xp, live, d);
          // C: d0 (out g, x row 2t), d1 (out g, row 2t + 1), d2 / d3 the same for out g + 8.
          const int r0 = 8 * n + 2 * t;
          const float f0 = r0 < rows ? sw[u] * __ldg(fbase + r0 * x_blocks + kb + u) : 0.0f;
          const float f1 =
              r0 + 1 < rows ? sw[u] * __ldg(fbase + (r0 + 1) * x_blocks + kb + u) : 0.0f;
#pragma unroll
          for (int i = 0; i < kMT; ++i) {
            acc[i][n][0] = fmaf(d[i][0], f0, acc[i][n][0]);
            acc[i][n][1] = fmaf(d[i][1], f1, acc[i][n][1]);
            acc[i][n][2] = fmaf(d[i][2], f0, acc[i][n][2]);
            acc[i][n][3] = fmaf(d[i][3], f1, acc[i][n][3]);
          }
        }
      }
    }
  }
  detail::gemv_tc_finish<kMT, kNT>(acc, red, S, slice, o0, rows, total, y);
}

}  // namespace

namespace detail {

cudaError_t gemv_tc_split(const float* x, int64_t rows, int64_t cols, bool pair_order,
                          void* workspace, cudaStream_t stream) {
  const int64_t blocks = cols / 32, threads = rows * blocks * 4;
  if (threads > (int64_t{1} << 40)) return cudaErrorInvalidValue;
  __half* xq = static_cast<__half*>(workspace);
  float* xf =
      reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + gemv_tc_xq_bytes(rows, blocks));
  const auto grid = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  if (pair_order)
    return detail::launch_kernel(gemv_tc_split_kernel<true>, grid, kThreads, 0, stream, x, rows,
                                 cols, xq, xf);
  return detail::launch_kernel(gemv_tc_split_kernel<false>, grid, kThreads, 0, stream, x, rows,
                               cols, xq, xf);
}

}  // namespace detail

size_t fp8_gemv_tc_workspace_bytes(int64_t x_cols) {
  return detail::gemv_tc_split_bytes(kRowsMax, x_cols / 32);
}

cudaError_t fp8_block_gemv_tc(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                              int rows, int groups, int64_t out, int64_t in, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (!x || !w || !scale || !y || !workspace || rows < 1 || rows > kRowsMax || groups < 1 ||
      out < 1 || in < 32 || in % 32 != 0 || (groups > 1 && out % 32 != 0) ||
      in * groups > (int64_t{1} << 28) || out * groups > (int64_t{1} << 40) || !aligned16(x) ||
      !aligned16(w) || !aligned16(workspace) || static_cast<const void*>(x) == y ||
      workspace_bytes < fp8_gemv_tc_workspace_bytes(in * groups))
    return cudaErrorInvalidValue;
  const int64_t cols = in * groups, blocks = cols / 32;
  const cudaError_t se = detail::gemv_tc_split(x, rows, cols, false, workspace, stream);
  if (se != cudaSuccess) return se;
  const __half* xq = static_cast<const __half*>(workspace);
  const float* xf = reinterpret_cast<const float*>(static_cast<const uint8_t*>(workspace) +
                                                   detail::gemv_tc_xq_bytes(rows, blocks));
  const int64_t tiles = (out * groups + 16 * kMT - 1) / (16 * kMT), nkb = in / 32;
  int S = 1;
  while (S < 8 && tiles * S < kTargetWarps && nkb >= 8 * S) S *= 2;
  const int64_t grid = (tiles + 8 / S - 1) / (8 / S);
  if (grid > 0x7FFFFFFF) return cudaErrorInvalidValue;
  if (rows <= 8)
    return detail::launch_kernel(fp8_gemv_tc_kernel<1>, static_cast<unsigned>(grid), kThreads, 0,
                                 stream, xq, xf, w, scale, y, rows, groups, out, in, S);
  return detail::launch_kernel(fp8_gemv_tc_kernel<2>, static_cast<unsigned>(grid), kThreads, 0,
                               stream, xq, xf, w, scale, y, rows, groups, out, in, S);
}

}  // namespace dsv41::kernels
