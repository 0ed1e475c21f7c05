// Tensor-core form of moe_grouped_fp4_gemv (routed experts at decode and verify batches, spec
// model-architecture.md §1.4, §4): the CUDA-core kernel widens every E2M1 code to fp32 and
// multiplies per row (issue bound: 31 % of the H200's bandwidth at one row, and its time grows
// with rows: 16 rows ≈ 19× one row). Here the codes go through mma.sync as exact f16:
//  - x: the split of linear/gemv_tc.cuh in pair order (three f16 parts per (row, 32-column
//    block) with a power-of-two factor), one launch for all slot rows;
//  - a warp owns 32 weight rows (two 16-row MMA tiles) of one descriptor over a k slice; per
//    32-column block each lane holds 4 bytes (8 codes, columns 8t .. 8t + 7) of four rows (loaded
//    16 bytes per row for 4 blocks at once and transposed within the lane's group of 4), and
//    one nibble-pair decode (Fp4Row32::nibbles_to_float2's bit placement: e2m1 · 2^-14 as f16,
//    exact) yields columns (c, c + 4), so MMA m takes the pairs (2m, 2m + 4) and (2m + 1, 2m + 5)
//    as its logical k 2t, 2t + 1 and 8 + 2t, 9 + 2t — the split stores x in the same order;
//  - per block the partial product D is scaled by the row's E8M0 scale · 2^14 and the x row's
//    factor; the S k slices of a tile are summed in slice order in shared memory (deterministic
//    for a shape).
#include <cuda_fp16.h>

#include <cstdint>

#include "common/launch.cuh"
#include "common/mma_sync.cuh"
#include "dsv41k/moe.hpp"
#include "linear/gemv_tc.cuh"
#include "linear/quant_gemv.cuh"
#include "moe/fp4_mma_fragments.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kParts = detail::kGemvTcParts;
constexpr int kMT = 2;  // 16-row MMA tiles per warp
constexpr int kU = 4;   // 32-column blocks per round (their 4 scale bytes are one load)
constexpr int64_t kTargetWarps = 2048;

template <int kNT>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_fp4_gemv_tc_kernel(const MoeGemvDesc* __restrict__ desc, const __half* __restrict__ xq,
                               const float* __restrict__ xf, float* __restrict__ y, int64_t out,
                               int64_t in, int S) {
  detail::pdl_begin();
  __shared__ float red[8][kMT][kNT][4][32];
  const MoeGemvDesc dsc = desc[blockIdx.y];
  const int rows = min(dsc.rows, kMoeGemvMaxRows);
  if (rows <= 0) return;  // uniform over the block
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (8 / S) + warp / S;
  const int slice = warp % S;
  const int64_t o0 = tile * 16 * kMT;
  const int64_t nkb = in / 32, rounds = nkb / kU;
  float acc[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][n][c] = 0.0f;
  if (o0 < out) {
    const uint8_t* wr[kMT][2];
    const uint8_t* sr[kMT][2];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = min(o0 + 16 * i + 8 * h + g, out - 1);
        wr[i][h] = dsc.w + row * (in / 2) + 16 * t;
        sr[i][h] = dsc.scale + row * nkb;
      }
    const int64_t r0 = slice * rounds / S, r1 = (slice + 1) * rounds / S;
    const __half* xbase = xq + static_cast<int64_t>(dsc.x_row) * nkb * kParts * 32 + 8 * t;
    const float* fbase = xf + static_cast<int64_t>(dsc.x_row) * nkb;
    for (int64_t rd = r0; rd < r1; ++rd) {
      const int64_t kb = rd * kU;
      // Lane t loads the 16 bytes of block kb + t (full 32-byte sectors: 4-byte loads per block
      // left half of every sector to the next instruction), then a 4 × 4 word transpose in the
      // lane's group of 4 gives it word t of each of the 4 blocks.
      uint4 raw[kMT][2];
      uint32_t q[kU][kMT][2], sc[kMT][2];
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          raw[i][h] = detail::load_stream_u4(wr[i][h] + kb * 16);
          sc[i][h] = __ldg(reinterpret_cast<const uint32_t*>(sr[i][h] + kb));
        }
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t w4[4] = {raw[i][h].x, raw[i][h].y, raw[i][h].z, raw[i][h].w};
          detail::fp4_transpose4(w4, t);
#pragma unroll
          for (int u = 0; u < kU; ++u) q[u][i][h] = w4[u];
        }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        uint32_t a[kMT][2][4];
#pragma unroll
        for (int i = 0; i < kMT; ++i)
#pragma unroll
          for (int m = 0; m < 2; ++m) detail::fp4_a_fragment(q[u][i][0], q[u][i][1], m, a[i][m]);
        // Row scales of this block · 2^14 (the f16 codes carry 2^-14).
        float sw[kMT][2];
#pragma unroll
        for (int i = 0; i < kMT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            sw[i][h] = detail::e8m0_to_float(static_cast<uint8_t>(sc[i][h] >> (8 * u))) * 16384.0f;
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
          const int xr = 8 * n + g;  // the B operand's column = x row of the descriptor
          const bool live = xr < rows;
          const uint4* xp =
              reinterpret_cast<const uint4*>(xbase + (xr * nkb + kb + u) * kParts * 32);
          float d[kMT][4];
          detail::gemv_tc_block_mma<kMT>(a, xp, live, d);
          // C: d0 (out g, x row 2t), d1 (out g, row 2t + 1), d2 / d3 the same for out g + 8.
          const int x0 = 8 * n + 2 * t;
          const float f0 = x0 < rows ? __ldg(fbase + x0 * nkb + kb + u) : 0.0f;
          const float f1 = x0 + 1 < rows ? __ldg(fbase + (x0 + 1) * nkb + kb + u) : 0.0f;
#pragma unroll
          for (int i = 0; i < kMT; ++i) {
            acc[i][n][0] = fmaf(d[i][0], sw[i][0] * f0, acc[i][n][0]);
            acc[i][n][1] = fmaf(d[i][1], sw[i][0] * f1, acc[i][n][1]);
            acc[i][n][2] = fmaf(d[i][2], sw[i][1] * f0, acc[i][n][2]);
            acc[i][n][3] = fmaf(d[i][3], sw[i][1] * f1, acc[i][n][3]);
          }
        }
      }
    }
  }
  detail::gemv_tc_finish<kMT, kNT>(acc, red, S, slice, o0, rows, out,
                                   y + static_cast<int64_t>(dsc.y_row) * out);
}

}  // namespace

size_t moe_grouped_fp4_gemv_tc_workspace_bytes(int64_t x_rows, int64_t in) {
  return detail::gemv_tc_split_bytes(x_rows, in / 32);
}

cudaError_t moe_grouped_fp4_gemv_tc(const MoeGemvDesc* desc, int n_desc, int max_rows,
                                    const float* x, int64_t x_rows, float* y, int64_t out,
                                    int64_t in, void* workspace, size_t workspace_bytes,
                                    cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (desc == nullptr || x == nullptr || y == nullptr || workspace == nullptr || n_desc < 1 ||
      n_desc > 65535 || max_rows < 1 || max_rows > kMoeGemvMaxRows || x_rows < 1 ||
      x_rows > (int64_t{1} << 24) || out < 1 || in < 128 || in % 128 != 0 ||
      in > (int64_t{1} << 28) || !aligned16(x) || !aligned16(workspace) ||
      static_cast<const void*>(x) == y ||
      workspace_bytes < moe_grouped_fp4_gemv_tc_workspace_bytes(x_rows, in))
    return cudaErrorInvalidValue;
  const cudaError_t se = detail::gemv_tc_split(x, x_rows, in, true, workspace, stream);
  if (se != cudaSuccess) return se;
  const int64_t blocks = in / 32;
  const auto* xq = static_cast<const __half*>(workspace);
  const auto* xf = reinterpret_cast<const float*>(static_cast<const uint8_t*>(workspace) +
                                                  detail::gemv_tc_xq_bytes(x_rows, blocks));
  const int64_t tiles = (out + 16 * kMT - 1) / (16 * kMT), rounds = blocks / kU;
  int S = 1;
  while (S < 8 && tiles * n_desc * S < kTargetWarps && rounds >= 4 * S) S *= 2;
  const int64_t gx = (tiles + 8 / S - 1) / (8 / S);
  if (gx > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(n_desc));
  if (max_rows <= 8)
    return detail::launch_kernel(grouped_fp4_gemv_tc_kernel<1>, grid, kThreads, 0, stream, desc, xq,
                                 xf, y, out, in, S);
  return detail::launch_kernel(grouped_fp4_gemv_tc_kernel<2>, grid, kThreads, 0, stream, desc, xq,
                               xf, y, out, in, S);
}

}  // namespace dsv41::kernels
