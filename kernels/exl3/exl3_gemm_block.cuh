// One block of the EXL3 fused decode GEMM for prefill tiles of up to 64 activation rows (spec
// exl3-format.md §1.1, §3): y = had128(had128(x ⊙ suh) · Ŵ) ⊙ svh for 128 output columns, each
// weight decoded ONCE per 64 rows (exl3g::gemv_block decodes it once per 16: at a 2048-token
// chunk the routed experts took 746 ms of 2133, H200, docs/perf.md).
//
// Work split. Block = (matrix, 256 output columns = 16 n-tiles), 16 warps; warp w owns n-tile w
// over the whole k range and all 64 rows (8 groups of 8 = the n8 of m16n8k16), so no cross-warp
// reduction is needed (a last column group of 128 leaves warps 8-15 without a tile). Per 128-chunk
// of k: the block stages the chunk's trellis (8 k16 steps × 16 tiles, 8 contiguous runs of 512K
// bytes) with cp.async one chunk ahead (double buffer), the warps transform the 64 rows' xh (4 rows
// each, exl3g::transform_row: the CPU's butterflies bit for bit,
// power-of-two scale per (row, chunk), f16 hi + lo), then each warp decodes its tile of every
// step into an A fragment (exl3d::decode_lane) and runs 2 MMAs (hi, lo) per row group. The same
// arithmetic per output as gemv_block with one k split: fp32 tensor-core accumulation over the
// chunk's k16 steps in order, accumulators rescaled by exact powers of two at chunk changes, so
// the same error bound holds (docs/kernels.md). Output, in two halves of 32 rows: accumulators ->
// shared memory -> output butterflies, 1/sqrt(128), svh, one warp per (row, 128 columns). The xh
// transform is the same work for 128 or 256 columns, so 256-column blocks halve its share: with
// 128 (8 warps) it cost about as many instructions as the trellis decode.
#pragma once

#include "exl3/exl3_gemv_block.cuh"

namespace dsv41::kernels::exl3g {

constexpr int kGemmRows = 64;  // activation rows per block: 8 groups of 8
constexpr int kGemmWarps = 16, kGemmThreads = 32 * kGemmWarps;
constexpr int kGemmCols = 16 * kGemmWarps;  // 256 output columns per block

template <int K>
struct GemmSmem {
  static constexpr int kStepBytes = kGemmWarps * 32 * K;  // the 16 tiles of one k16 step
  static constexpr int kChunkBytes = 8 * kStepBytes;      // 8 k16 steps = one 128-chunk of k
  static constexpr int kTrellisBytes = 2 * kChunkBytes;
  static constexpr int kXsBytes = 8 * kGemmRows * 4 * 16;  // [step][row][c] uint4 = 32 KB
  static constexpr int kRedBytes = 32 * kGemmCols * 4;     // 32 y rows of the block, aliases xs
  static constexpr int kExBytes = kGemmRows * 4;
  static constexpr int kBytes =
      kTrellisBytes + (kXsBytes > kRedBytes ? kXsBytes : kRedBytes) + kExBytes;  // 72.25 KB at K5
};

// The block's work for column group cg (256 columns) of `m` (m.rows <= 64). smem holds
// GemmSmem<K>::kBytes. Every thread of the block (kGemmThreads) must call it.
template <int K, int CB>
__device__ __forceinline__ void gemm_block(const MatrixIo& m, int64_t k, int64_t n, int cg,
                                           uint8_t* smem) {
  using S = GemmSmem<K>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunks = static_cast<int>(k / 128), tiles_n = static_cast<int>(n / 16);
  uint8_t* tb = smem;
  uint32_t* xs = reinterpret_cast<uint32_t*>(smem + S::kTrellisBytes);
  float* red = reinterpret_cast<float*>(xs);
  int* ex = reinterpret_cast<int*>(smem + S::kTrellisBytes +
                                   (S::kXsBytes > S::kRedBytes ? S::kXsBytes : S::kRedBytes));
  const int64_t step_stride = static_cast<int64_t>(tiles_n) * 32 * K;  // bytes between k16 steps
  const int tiles = min(kGemmWarps, tiles_n - kGemmWarps * cg);        // 16, or 8 at the end
  const bool has_tile = warp < tiles;
  const uint8_t* col_base = m.trellis + static_cast<int64_t>(kGemmWarps * cg) * 32 * K;
  // Chunk ch -> buffer ch % 2: 8 runs (one per k16 step) of tiles · 32K contiguous bytes.
  auto issue = [&](int ch) {
    if (ch < chunks) {
      const uint32_t dst = smem_addr(tb + (ch & 1) * S::kChunkBytes);
      const int pieces = tiles * 2 * K;  // 16-byte pieces per step run
      for (int i = threadIdx.x; i < 8 * pieces; i += kGemmThreads) {
        const int st = i / pieces, pc = i % pieces;
        cp_async16(dst + st * S::kStepBytes + 16 * pc,
                   col_base + (int64_t{ch} * 8 + st) * step_stride + 16 * pc);
      }
    }
    cp_async_commit();
  };
  issue(0);

  const exl3d::LaneWindow lw = exl3d::lane_window<K>(lane);
  const int g = lane >> 2, c = lane & 3;
  float acc[8][4];  // [row group b][m16n8 accumulator]: rows 8b + 2c + {0, 1}, columns g, g + 8
#pragma unroll
  for (int b = 0; b < 8; ++b)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[b][j] = 0.0f;
  int e_cur[8][2];
#pragma unroll
  for (int b = 0; b < 8; ++b) e_cur[b][0] = e_cur[b][1] = 0;

  for (int ch = 0; ch < chunks; ++ch) {
    __syncthreads();  // buffer (ch + 1) % 2 and xs are no longer read (previous chunk)
    issue(ch + 1);
    {
      float su[4];
      const bool in_x = chunk_inputs(m, ch, lane, su);
      for (int r = 4 * warp; r < 4 * warp + 4; ++r)
        transform_row<kGemmRows>(m, ch, lane, r, xs, ex, su, in_x);
    }
    cp_async_wait<1>();  // this thread's pieces of chunk ch have landed
    __syncthreads();     // everyone's pieces and xh rows are visible
#pragma unroll
    for (int b = 0; b < 8; ++b)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int e = ex[8 * b + 2 * c + h];
        const float f = pow2f(e - e_cur[b][h]);
        e_cur[b][h] = e;
        acc[b][h] *= f;
        acc[b][2 + h] *= f;
      }
    const uint8_t* buf = tb + (ch & 1) * S::kChunkBytes;
#pragma unroll 1
    for (int st = 0; st < (has_tile ? 8 : 0); ++st) {
      const uint32_t* tw =
          reinterpret_cast<const uint32_t*>(buf + st * S::kStepBytes) + warp * 8 * K;
      uint32_t p[4];
      exl3d::decode_lane<K, CB>(tw[lw.i0], tw[lw.i1], exl3d::needs_third_word<K>() ? tw[lw.i2] : 0u,
                                lw.off, p);
      const uint32_t a[4] = {p[0], p[2], p[1], p[3]};  // (j0,j1) (j4,j5) (j2,j3) (j6,j7)
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        const uint4 bf = reinterpret_cast<const uint4*>(xs)[(st * kGemmRows + 8 * b + g) * 4 + c];
        mma16816(acc[b], a, bf.x, bf.y);
        mma16816(acc[b], a, bf.z, bf.w);
      }
    }
  }
  cp_async_wait<0>();
  const int rows = min(m.rows, kGemmRows);
  for (int half = 0; half < 2; ++half) {  // rows [32 half, 32 half + 32) through red
    __syncthreads();  // every warp is done with xs (half 0) / the previous half's red rows
    if (has_tile) {
#pragma unroll
      for (int bb = 0; bb < 4; ++bb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int b = 4 * half + bb;
          const float f = pow2f(-e_cur[b][h]);
          float* rr = red + (8 * bb + 2 * c + h) * kGemmCols + 16 * warp;
          rr[g] = acc[b][h] * f;
          rr[g + 8] = acc[b][2 + h] * f;
        }
    }
    __syncthreads();
    // Work item = (row, 128-column half of the block): 32 rows x (tiles / 8) halves.
    for (int it = warp; it < 32 * (tiles / 8); it += kGemmWarps) {
      const int rr = it % 32, ch = it / 32, r = 32 * half + rr;
      if (r >= rows) continue;  // warp-uniform
      float sv[4];
      const int64_t col = int64_t{cg} * kGemmCols + ch * 128 + 4 * lane;
      load_f16x4(m.svh + col, sv);
      store_output(reinterpret_cast<const float4*>(red + rr * kGemmCols + ch * 128)[lane], sv,
                   m.y + r * m.y_cols, col, m.y_cols, lane);
    }
  }
}

}  // namespace dsv41::kernels::exl3g
