// Tensor-core routed-expert GEMV for decode steps (spec model-architecture.md §1.4, §4): the
// moe_grouped_fp4_gemv_tc product for descriptors of at most 8 x rows, with the x split done by
// each block into shared memory instead of a separate launch into a workspace.
//
// Why: the CUDA-core kernel (moe_grouped_fp4_gemv.cu) widens every E2M1 code to fp32 and
// multiplies per row, so its time grows with the rows per expert; here a code pair costs one f16x2
// placement (4 integer ops), the products go through mma.sync, and 1..8 x rows cost the same (the
// B operand has 8 columns). Measured (H100, ncu and the 40-layer step of docs/perf.md "Stop 33"):
// 262 instead of ~380 warp instructions per KB of weights at one row, yet slower there (the
// kernel holds 128 registers: 2 blocks, 16 warps per SM, 0.9 eligible warps per scheduler), and
// faster from 2 rows (routed experts 6.20 -> 5.96 ms at 2 rows, 19.17 -> 17.75 at 6 with w2 on
// it; 2.85 -> 3.48 at one row).
//
// Work split: a warp owns 32 weight rows (two 16-row MMA tiles) of one descriptor over a k slice
// (S slices of a tile are warps of one block, summed in slice order in shared memory:
// deterministic for a shape). Per round of 4 blocks of 32 columns each lane loads 16 bytes of 4
// rows plus their 4 scale bytes; the next round's loads are in flight while a round is
// multiplied (fp4_mma_fragments.cuh has the fragment layout). Per block: D = Σ parts A · B_part
// (fresh fp32 fragment), acc += D · 2^(e-127) (the row's E8M0 scale).
//
// x split: per x row one power-of-two factor 2^ex that brings the row's largest |x| into
// [2^14, 2^15), x · 2^-ex as three f16 parts hi + mid + lo (a row-wide factor rather than
// gemv_tc.cuh's per block one: one multiply per output at the end instead of one per block and
// element of D; 33 significant bits relative to the row maximum). Staged layout per row n: for
// each 32-column block, 3 parts of 32 halves in pair order; each row padded by 64 bytes
// (kStageRowPadU4), so that the two x rows of one 8-lane shared-load phase fall into different
// banks. Rows whose whole split exceeds the 88 KB budget (3+ rows at in = 5120, 7+ at 2304) are
// staged in chunks of rounds, a barrier between chunks: an expert's 3-8 rows then cost one pass
// over its weights, where 2-row descriptors cost one pass per 2 rows (routed experts of a
// 256-token chunk: docs/perf.md "Stop 37").
#include <cuda_fp16.h>

#include <algorithm>
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
constexpr int kWarps = kThreads / 32;
constexpr int kMT = 2;  // 16-row MMA tiles per warp
constexpr int kU = 4;   // 32-column blocks per round (their 4 scale bytes are one load)
constexpr int kParts = detail::kGemvTcParts;  // f16 parts of x
constexpr int kMaxRows = 8;                   // x rows per descriptor: the B operand's 8 columns
constexpr int64_t kTargetWarps = 2048;
constexpr int kBlockU4 = kParts * 4;  // uint4s per staged 32-column block (3 parts × 64 bytes)
constexpr int kStageRowPadU4 = 4;     // 64 bytes: rows ≡ 64 mod 128 bytes apart (nkb % 4 == 0)
// Staged x bytes per block: with the 8.3 KB of static shared memory under GB10's 99 KB opt-in
// (e.g. 2 rows at in = 5120, 6 at 2304).
constexpr int64_t kStageLimitBytes = 88 * 1024;

// A staged row of `cr` rounds (kU blocks of 32 columns each) in uint4s, and the bytes of `rows`.
__host__ __device__ constexpr int64_t stage_row_u4(int64_t cr) {
  return cr * kU * kBlockU4 + kStageRowPadU4;
}
__host__ __device__ constexpr int64_t stage_bytes(int rows, int64_t cr) {
  return rows * stage_row_u4(cr) * 16;
}
// Rounds staged at a time: all in / 128 where the rows fit the budget, else as many as fit (8 rows:
// 14 of in = 5120's 40, 86.5 KB).
__host__ __device__ constexpr int64_t stage_chunk_rounds(int rows, int64_t in) {
  const int64_t rounds = in / 32 / kU;
  const int64_t fit = (kStageLimitBytes / (16 * rows) - kStageRowPadU4) / (kU * kBlockU4);
  return rounds < fit ? rounds : fit;
}

__device__ __forceinline__ const float* x_row_ptr(const float* __restrict__ x,
                                                  const int32_t* __restrict__ slot_token, int x_row,
                                                  int n, int64_t in) {
  const int64_t r = slot_token != nullptr ? static_cast<int64_t>(slot_token[x_row + n])
                                          : static_cast<int64_t>(x_row) + n;
  return x + r * in;
}

// Per x row n < rows of the descriptor (row n = slot_token[x_row + n], or x_row + n without a
// map): down[n] = 2^-ex, fx[n] = 2^(ex + 14) (the codes' 2^-14 folded in). Every thread of the
// block calls it; ends with a barrier.
__device__ __forceinline__ void row_scales(const float* __restrict__ x,
                                           const int32_t* __restrict__ slot_token, int x_row,
                                           int rows, int64_t in, float* down, float* fx,
                                           float (*wmax)[kMaxRows]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n4 = static_cast<int>(in / 4);
  // Row maxima: per thread, then warp, then the block's 8 warps through wmax.
#pragma unroll
  for (int n = 0; n < kMaxRows; ++n) {
    if (n >= rows) break;
    const float4* xr = reinterpret_cast<const float4*>(x_row_ptr(x, slot_token, x_row, n, in));
    float m = 0.0f;
    for (int f = threadIdx.x; f < n4; f += kThreads) {
      const float4 v = __ldg(xr + f);
      m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if (lane == 0) wmax[warp][n] = m;
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    const int n = threadIdx.x;
    float m = wmax[0][n];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, wmax[w][n]);
    // m in [2^E, 2^(E+1)) -> ex = E - 14 puts m · 2^-ex in [2^14, 2^15) (f16 max 65504), clamped
    // so that 2^-ex and 2^(ex + 14) are normal floats.
    const int E = ((__float_as_int(m) >> 23) & 0xFF) - 127;
    const int ex = m == 0.0f ? 0 : max(-100, min(113, E - 14));
    down[n] = __int_as_float((127 - ex) << 23);
    fx[n] = __int_as_float((127 + ex + 14) << 23);
  }
  __syncthreads();
}

// Rounds [c0, c1) of x rows [0, rows) split into xs (rows stage_row_u4(c1 - c0) uint4s apart).
// Every thread of the block calls it; ends with a barrier.
__device__ __forceinline__ void stage_rounds(const float* __restrict__ x,
                                             const int32_t* __restrict__ slot_token, int x_row,
                                             int rows, int64_t in, int64_t c0, int64_t c1,
                                             const float* down, uint4* xs) {
  // 8-column slots: slot j = block j / 4, columns 8 (j % 4) .. + 7 of it; kU · 4 per round.
  const int slots = static_cast<int>((c1 - c0) * kU * 4);
  const int stride = static_cast<int>(stage_row_u4(c1 - c0));
  for (int n = 0; n < rows; ++n) {
    const float dn = down[n];
    const float4* xr =
        reinterpret_cast<const float4*>(x_row_ptr(x, slot_token, x_row, n, in)) + c0 * kU * 8;
    for (int j = threadIdx.x; j < slots; j += kThreads) {
      const float4* p = xr + 2 * j;
      const float4 a = __ldg(p), c = __ldg(p + 1);
      const float v[8] = {a.x, c.x, a.y, c.y, a.z, c.z, a.w, c.w};  // pair order
      uint4 part[kParts];
      detail::gemv_tc_split8(v, dn, part);
      uint4* dst = xs + n * stride + (j >> 2) * kBlockU4 + (j & 3);
#pragma unroll
      for (int p2 = 0; p2 < kParts; ++p2) dst[p2 * 4] = part[p2];
    }
  }
  __syncthreads();
}

// E8M0 bytes of `w` with a 0x00 or 0xFF among them (the two codes whose float is not byte << 23:
// 2^-127 is subnormal, 0xFF is NaN).
__device__ __forceinline__ bool e8m0_special(uint32_t w) {
  const uint32_t zero = (w - 0x01010101u) & ~w & 0x80808080u;
  const uint32_t ff = (0xFEFEFEFEu - w) & w & 0x80808080u;
  return (zero | ff) != 0;
}

// Byte u of w as the float 2^(byte - 127) for bytes 1..254.
__device__ __forceinline__ float e8m0_fast(uint32_t w, int u) {
  const uint32_t bits = u < 3 ? w << (23 - 8 * u) : w >> 1;
  return __uint_as_float(bits & 0x7F800000u);
}

// The products of one round (4 blocks of 32 columns) into acc; q[k][u]: word t of block u of
// row k = 2 i + h (after fp4_transpose4). kExact: scales through e8m0_to_float (a round with a
// 0x00 or 0xFF scale byte).
template <bool kOneRow, bool kExact>
__device__ __forceinline__ void round_products(const uint32_t (&q)[kMT * 2][kU],
                                               const uint32_t (&sc)[kMT * 2], const uint4* xb,
                                               bool xlive, float (&acc)[kMT][4]) {
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    uint4 b[kParts];
#pragma unroll
    for (int p = 0; p < kParts; ++p)
      b[p] = xlive ? xb[u * kBlockU4 + p * 4] : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int i = 0; i < kMT; ++i) {
      uint32_t a[2][4];
      detail::fp4_a_fragment(q[2 * i][u], q[2 * i + 1][u], 0, a[0]);
      detail::fp4_a_fragment(q[2 * i][u], q[2 * i + 1][u], 1, a[1]);
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int p = kParts - 1; p >= 0; --p) {  // smallest part first
        detail::mma_f16_16816(d, a[0], b[p].x, b[p].y);
        detail::mma_f16_16816(d, a[1], b[p].z, b[p].w);
      }
      const uint32_t w0 = sc[2 * i], w1 = sc[2 * i + 1];
      const float s0 =
          kExact ? detail::e8m0_to_float(static_cast<uint8_t>(w0 >> (8 * u))) : e8m0_fast(w0, u);
      const float s1 =
          kExact ? detail::e8m0_to_float(static_cast<uint8_t>(w1 >> (8 * u))) : e8m0_fast(w1, u);
      acc[i][0] = fmaf(d[0], s0, acc[i][0]);
      acc[i][2] = fmaf(d[2], s1, acc[i][2]);
      if (!kOneRow) {
        acc[i][1] = fmaf(d[1], s0, acc[i][1]);
        acc[i][3] = fmaf(d[3], s1, acc[i][3]);
      }
    }
  }
}

// One round's 16 weight bytes of each of the lane's 4 rows and their 4 scale bytes.
struct RoundRegs {
  uint32_t w[kMT * 2][kU];
  uint32_t s[kMT * 2];
};

__device__ __forceinline__ void load_round(RoundRegs& r, const uint8_t* wcur, const uint8_t* scur,
                                           const uint32_t (&woff)[kMT * 2]) {
#pragma unroll
  for (int k = 0; k < kMT * 2; ++k) {
    const uint4 v = detail::load_stream_u4(wcur + woff[k]);
    r.w[k][0] = v.x;
    r.w[k][1] = v.y;
    r.w[k][2] = v.z;
    r.w[k][3] = v.w;
    r.s[k] = __ldg(reinterpret_cast<const uint32_t*>(scur + woff[k] / 16));
  }
}

// The products of a loaded round (its words transposed in place).
template <bool kOneRow>
__device__ __forceinline__ void run_round(RoundRegs& r, int t, const uint4* xb, bool xlive,
                                          float (&acc)[kMT][4]) {
  bool special = false;
#pragma unroll
  for (int k = 0; k < kMT * 2; ++k) {
    detail::fp4_transpose4(r.w[k], t);
    special |= e8m0_special(r.s[k]);
  }
  // Warp-uniform (mma.sync and the shuffles need every lane): a rare path for the whole round,
  // so the fast one carries no selects.
  if (__any_sync(0xFFFFFFFFu, special))
    round_products<kOneRow, true>(r.w, r.s, xb, xlive, acc);
  else
    round_products<kOneRow, false>(r.w, r.s, xb, xlive, acc);
}

// Rounds [0, n) from wcur / scur (weights) and xb (staged x) into acc. Two register sets, so a
// round's words are transposed in place while the next round's loads are in flight (a copy per
// round spilled at the 128-register cap).
template <bool kOneRow>
__device__ __forceinline__ void mul_rounds(const uint8_t* wcur, const uint8_t* scur,
                                           const uint4* xb, int n, const uint32_t (&woff)[kMT * 2],
                                           int t, bool xlive, float (&acc)[kMT][4]) {
  RoundRegs ra, rb;
  load_round(ra, wcur, scur, woff);
  for (int rd = 0; rd < n; rd += 2) {
    if (rd + 1 < n) load_round(rb, wcur + kU * 16, scur + kU, woff);
    run_round<kOneRow>(ra, t, xb, xlive, acc);
    if (rd + 1 >= n) break;
    if (rd + 2 < n) load_round(ra, wcur + 2 * kU * 16, scur + 2 * kU, woff);
    run_round<kOneRow>(rb, t, xb + kU * kBlockU4, xlive, acc);
    wcur += 2 * kU * 16;
    scur += 2 * kU;
    xb += 2 * kU * kBlockU4;
  }
}

// kOneRow: only x row 0 (B column 0: C registers 0 and 2 of lanes t = 0) is accumulated.
// kChunked: x staged `chunk` rounds at a time (the rows' whole split exceeds the budget).
template <bool kOneRow, bool kChunked>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_fp4_gemv_tc_decode_kernel(const MoeGemvDesc* __restrict__ desc,
                                      const float* __restrict__ x,
                                      const int32_t* __restrict__ slot_token, float* __restrict__ y,
                                      int64_t out, int64_t in, int S, int stage_rows, int chunk) {
  extern __shared__ uint4 xs[];  // [stage_rows][stage_row_u4(chunk)]
  __shared__ float red[kWarps][kMT][4][32];
  __shared__ float wmax[kWarps][kMaxRows];
  __shared__ float fx[kMaxRows], down[kMaxRows];
  detail::pdl_begin();
  const MoeGemvDesc dsc = desc[blockIdx.y];
  const int rows = min(dsc.rows, stage_rows);
  if (rows <= 0) return;  // uniform over the block
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (kWarps / S) + warp / S;
  const int slice = warp % S;
  const int64_t o0 = tile * 16 * kMT;
  const int64_t nkb = in / 32, rounds = nkb / kU, row_bytes = in / 2;
  const int r0 = static_cast<int>(slice * rounds / S),
            r1 = static_cast<int>((slice + 1) * rounds / S);
  const bool live = o0 < out && r0 < r1;

  // Rows k = 2 i + h of the lane: o0 + 8 k + g (rows past `out` read row 0 of the tile's lane,
  // never stored), as byte offsets from row k = 0 (32 bits: out · in / 2 < 2^31); the row's
  // scale bytes are 16 times closer together (in / 32 of them per in / 2 weight bytes).
  const int64_t row0 = min(o0 + g, out - 1);
  uint32_t woff[kMT * 2];
#pragma unroll
  for (int k = 0; k < kMT * 2; ++k)
    woff[k] = o0 + 8 * k + g < out ? static_cast<uint32_t>(8 * k * row_bytes) : 0u;
  const uint8_t* wbase = dsc.w + row0 * row_bytes + t * 16;
  const uint8_t* sbase = dsc.scale + row0 * nkb;
  // The first round's lines are asked of L2 before the x split and its barriers (plain loads
  // here would keep 20 registers live across the split).
  if (live) {
#pragma unroll
    for (int k = 0; k < kMT * 2; ++k) {
      detail::prefetch_l2(wbase + static_cast<int64_t>(r0) * kU * 16 + woff[k]);
      if (t == 0) detail::prefetch_l2(sbase + static_cast<int64_t>(r0) * kU + woff[k] / 16);
    }
  }
  row_scales(x, slot_token, dsc.x_row, rows, in, down, fx, wmax);

  float acc[kMT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
  const bool xlive = g < rows;  // this lane's B column is an x row
  if constexpr (!kChunked) {
    stage_rounds(x, slot_token, dsc.x_row, rows, in, 0, rounds, down, xs);
    if (live)
      mul_rounds<kOneRow>(
          wbase + static_cast<int64_t>(r0) * kU * 16, sbase + static_cast<int64_t>(r0) * kU,
          xs + g * stage_row_u4(rounds) + static_cast<int64_t>(r0) * kU * kBlockU4 + t, r1 - r0,
          woff, t, xlive, acc);
  } else {
    // Each warp multiplies the rounds of its slice [r0, r1) that a chunk holds.
    for (int c0 = 0; c0 < rounds; c0 += chunk) {
      const int c1 = min(static_cast<int>(rounds), c0 + chunk);
      if (c0 > 0) __syncthreads();  // every warp has read the previous chunk
      stage_rounds(x, slot_token, dsc.x_row, rows, in, c0, c1, down, xs);
      const int a = max(r0, c0), b = min(r1, c1);
      if (!live || a >= b) continue;
      mul_rounds<kOneRow>(wbase + static_cast<int64_t>(a) * kU * 16,
                          sbase + static_cast<int64_t>(a) * kU,
                          xs + g * stage_row_u4(c1 - c0) + (a - c0) * kU * kBlockU4 + t, b - a,
                          woff, t, xlive, acc);
      if (c1 < r1) {  // the next chunk's first round, asked of L2 before its split
#pragma unroll
        for (int k = 0; k < kMT * 2; ++k) {
          detail::prefetch_l2(wbase + static_cast<int64_t>(c1) * kU * 16 + woff[k]);
          if (t == 0) detail::prefetch_l2(sbase + static_cast<int64_t>(c1) * kU + woff[k] / 16);
        }
      }
    }
  }

  // The S slices of a tile in slice order, then slice 0 stores x rows < rows, outputs < out.
  if (S > 1) {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[warp][i][c][lane] = acc[i][c];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float s = red[warp][i][c][lane];
        for (int j = 1; j < S; ++j) s += red[warp + j][i][c][lane];
        acc[i][c] = s;
      }
  }
  if (o0 >= out) return;
  float* yd = y + static_cast<int64_t>(dsc.y_row) * out;
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int r = 2 * t + (c & 1);
      const int64_t o = o0 + 16 * i + g + 8 * (c >> 1);
      if (r < rows && o < out) yd[r * out + o] = acc[i][c] * fx[r];
    }
}

}  // namespace

bool moe_grouped_fp4_gemv_tc_decode_supported(int max_rows, int64_t in) {
  return max_rows >= 1 && max_rows <= kMaxRows && in >= 128 && in % 128 == 0 &&
         in <= (int64_t{1} << 28);
}

cudaError_t moe_grouped_fp4_gemv_tc_decode(const MoeGemvDesc* desc, int n_desc, int max_rows,
                                           const float* x, const int32_t* slot_token, float* y,
                                           int64_t out, int64_t in, cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (desc == nullptr || x == nullptr || y == nullptr || n_desc < 1 || n_desc > 65535 || out < 1 ||
      !moe_grouped_fp4_gemv_tc_decode_supported(max_rows, in) || !aligned16(x) ||
      static_cast<const void*>(x) == y)
    return cudaErrorInvalidValue;
  const int64_t tiles = (out + 16 * kMT - 1) / (16 * kMT), rounds = in / 32 / kU;
  int S = 1;
  while (S < kWarps && tiles * n_desc * S < kTargetWarps && rounds >= 4 * S) S *= 2;
  const int64_t gx = (tiles + kWarps / S - 1) / (kWarps / S);
  if (gx > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(n_desc));
  const int64_t chunk = stage_chunk_rounds(max_rows, in);
  const size_t smem = static_cast<size_t>(stage_bytes(max_rows, chunk));
  const auto kernel = chunk < rounds  ? grouped_fp4_gemv_tc_decode_kernel<false, true>
                      : max_rows == 1 ? grouped_fp4_gemv_tc_decode_kernel<true, false>
                                      : grouped_fp4_gemv_tc_decode_kernel<false, false>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
      e != cudaSuccess)
    return e;
  return detail::launch_kernel(kernel, grid, kThreads, smem, stream, desc, x, slot_token, y, out,
                               in, S, max_rows, static_cast<int>(chunk));
}

}  // namespace dsv41::kernels
