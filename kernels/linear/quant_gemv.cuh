// Decode GEMV over a quantised weight streamed once from memory for all activation rows
// (1..16 tokens). Shared by fp8_block_gemv.cu and fp4_expert_gemv.cu, which supply the format.
//
// Work split. A warp owns R consecutive output rows and a contiguous slice of the 16-byte weight
// chunks of those rows (ksplit warps of one block share the rows and split the chunks). Each lane
// reads one 16-byte chunk per row per step with a 128-bit non-L1-allocating load (lanes of a warp
// cover 512 contiguous bytes), dequantises it once into registers and uses it for every
// activation row. The next chunk's loads are issued before the current one is used. x is staged
// in shared memory when it fits (else read through L1). Partial sums are reduced by warp
// shuffles, then across the ksplit warps through shared memory in a fixed order (deterministic:
// no atomics). Measurements and the limits found: docs/perf.md "CUDA linear kernels (H200)".
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/rope.cuh"
#include "common/launch.cuh"

namespace dsv41::kernels::detail {

inline constexpr int kGemvThreads = 256;  // 8 warps per block
inline constexpr int kGemvWarps = kGemvThreads / 32;
// Steps (512 bytes per warp and row) a warp asks L2 for before its grid may read x: at most
// 2 · 4224 warps · 2 rows · 512 B = 8.7 MB for a full FP8 grid, a sixth of the H200's 50 MB L2.
inline constexpr int kGemvPrefetchSteps = 2;

// Optional epilogue of a GEMV whose output rows are heads of head_dim: the trailing rope_dim
// channels of every head rotated as rope_rotate would rotate them afterwards (pairs (2i, 2i+1),
// row t at position pos0 + t; the same rope_pair ops on the same sums, so the same bits). Output
// row pairs are adjacent in a warp's R rows (R even, row groups start on even rows) or in
// adjacent lanes of the split reduction. inv_freq null: none.
struct GemvRope {
  const float* inv_freq = nullptr;  // [rope_dim / 2]
  int head_dim = 0, rope_dim = 0;
  int64_t pos0 = 0;
};

// rope_pair on (even, odd) when output row o (even) lies in a head's rope slice.
__device__ __forceinline__ void gemv_rope_pair(const GemvRope& rope, int64_t o, int64_t t,
                                               float& even, float& odd) {
  const int c = static_cast<int>(o % rope.head_dim), r0 = rope.head_dim - rope.rope_dim;
  if (c >= r0) rope_pair(even, odd, rope.inv_freq[(c - r0) / 2], rope.pos0 + t, false);
}

// E8M0 byte -> 2^(e-127) (e = 0 is the fp32 subnormal 2^-127; 0xFF is NaN), as quant/dtype.cpp.
__device__ __forceinline__ float e8m0_to_float(uint8_t e) {
  if (e == 0xFF) return __int_as_float(0x7FC00000);
  return e == 0 ? __int_as_float(0x00400000) : __int_as_float(static_cast<int>(e) << 23);
}

// 16 bytes through L2 only: the weight stream is read once, L1 is kept for x.
__device__ __forceinline__ uint4 load_stream_u4(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Σ_j a[j] · b[j] over 16 values, fp32, in index order.
__device__ __forceinline__ float dot16(const float (&a)[16], const float (&b)[16]) {
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) acc = fmaf(a[j], b[j], acc);
  return acc;
}

// Staged x: float4 f of a row sits at f + f / 8 (16 bytes of padding per 128). The 8 lanes of one
// 128-bit shared-load phase read float4 F·c + j of 8 consecutive chunks c (F = 8 FP4, 4 FP8; j <
// F): unpadded those fall into 1 (FP4) or 2 (FP8) of the 8 16-byte bank groups, padded into 8
// different ones. F·c + j and F·c lie in the same 8-float4 group (F·c is 4 or 8 times c, j < F),
// so x_pad(F·c + j) = x_pad(F·c) + j: a lane reads at compile-time offsets from one pointer that
// advances by 36·F float4s per step (32 chunks); the XOR swizzle this replaced cost ~4 instructions
// per 128-bit load (`cuobjdump -sass` of the 1-row FP4 loop: 32 of 368 per step).
__host__ __device__ constexpr int x_pad(int f) { return f + (f >> 3); }
// float4s per staged x row (the last padded index + 1, rounded up).
__host__ __device__ constexpr int64_t staged_row_f4(int64_t in) {
  return in / 4 + (in / 4 + 7) / 8;
}
// Bytes of `rows` staged x rows.
__host__ __device__ constexpr int64_t staged_x_bytes(int64_t rows, int64_t in) {
  return rows * staged_row_f4(in) * 16;
}

// Format policy (Fmt):
//   kElemsPerChunk            weight elements in one 16-byte chunk (16 FP8, 32 FP4)
//   kSubChunks                groups of 16 elements per chunk
//   kScalePostMul             factor the decoded values are short of (applied per sub-chunk sum)
//   kScaleSharedByRows        one scale for the R rows of a warp (FP8 32-row blocks)
//   decode(chunk, sub, out)   16 fp32 values (unscaled) of sub-chunk `sub`
//   scale_ptr(scale, o, c, in)  address of the E8M0 scale of output row o, chunk c
//   kScaleStep                scale bytes from chunk c to chunk c + 32 (same row)
//
// kStageX: x [rows, in] is first copied into shared memory (staged_x_bytes <= 48 KB), so the
// per-lane 64-byte x reads cost one bank pass per quarter warp instead of 16 L1 lines per load.
// row_map (kStageX only; null: identity): staged row t is x row row_map[t] (a gather folded into
// the staging, moe_grouped_fp4_gemv_gathered).
// The work of block `block` (row groups [block · groups, ...)); also the body of the grouped
// routed-expert GEMV (kernels/moe/moe_grouped_fp4_gemv.cu).
template <class Fmt, int T, int R, bool kStageX>
__device__ __forceinline__ void quant_gemv_block(
    const float* __restrict__ x, const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale,
    float* __restrict__ y, int rows, int64_t out, int64_t in, int ksplit, int64_t block,
    int64_t x_stride, int64_t y_stride, const GemvRope& rope = GemvRope{},
    const int32_t* row_map = nullptr) {
  extern __shared__ float4 xs[];  // kStageX: [rows][staged_row_f4(in)], padded (x_pad)
  __shared__ float red[kGemvWarps][T * R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups = kGemvWarps / ksplit, group = warp / ksplit, part = warp % ksplit;
  const int64_t o0 = (block * groups + group) * R;
  const int64_t row_bytes = in * 16 / Fmt::kElemsPerChunk;
  const int64_t chunks = in / Fmt::kElemsPerChunk;
  const int64_t per = (chunks + ksplit - 1) / ksplit;
  const int64_t c_first = part * per + lane;
  const int64_t c_end = min(chunks, (part + 1) * per);
  const int iters = c_first < c_end ? static_cast<int>((c_end - c_first + 31) / 32) : 0;
  const int n4 = static_cast<int>(in / 4);
  const int sx4 = static_cast<int>(staged_row_f4(in));  // staged row stride in float4s
  const int64_t xs4 = x_stride / 4;  // float4s from one x row to the next (x_stride % 4 == 0)

  // Per-row weight and scale cursors, advanced by 32 chunks per step (index math stays out of
  // the inner loop: at 2 rows per warp it cost more issue slots than the decode). Rows past
  // `out` read row out - 1 and are never stored.
  const uint8_t* wp[R];
  const uint8_t* sp[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t o = min(o0 + r, out - 1);
    wp[r] = w + o * row_bytes + c_first * 16;
    sp[r] = Fmt::scale_ptr(scale, o, c_first, in);
  }
  // The first chunk's loads go out before the x staging and the barrier, and before the wait for
  // the kernel that writes x (common/launch.cuh): weights are never written, so under dependent
  // launch they stream in while that kernel finishes. The next kPrefetchSteps steps' lines go to
  // L2 meanwhile (one lane per 128-byte line).
  // The step's scale bytes travel with its weights (one step ahead): loaded only when the step
  // began, they put a full memory latency into every step after the weights had arrived, so a
  // step took ~L + C instead of ~(L + C) / 2 (L latency, C the step's arithmetic).
  constexpr int kScales = Fmt::kScaleSharedByRows ? 1 : R;  // scale bytes per step
  uint4 next[R];
  uint8_t next_scale[kScales];
  if (iters > 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) next[r] = load_stream_u4(wp[r]);
#pragma unroll
    for (int r = 0; r < kScales; ++r) next_scale[r] = __ldg(sp[r]);
    if ((lane & 7) == 0) {
      const int steps = min(iters - 1, kGemvPrefetchSteps);
      for (int it = 1; it <= steps; ++it)
#pragma unroll
        for (int r = 0; r < R; ++r) prefetch_l2(wp[r] + it * 32 * 16);
    }
  }
  pdl_begin();

  if constexpr (kStageX) {
    // Row by row, 4 loads in flight per thread before their stores: a flat index over rows · n4
    // took an integer division per float4 (`nvcc -ptx`: div.s32 in the copy loop), ~5 % of a
    // 1-row routed-expert block's instructions, and this copy is on every block's critical path.
    for (int t = 0; t < rows; ++t) {
      const int64_t xr = row_map != nullptr ? static_cast<int64_t>(row_map[t]) : t;
      const float4* xt = reinterpret_cast<const float4*>(x) + xr * xs4;
      float4* st = xs + t * sx4;
      int f = threadIdx.x;
      for (; f + 3 * kGemvThreads < n4; f += 4 * kGemvThreads) {
        float4 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = __ldg(xt + f + j * kGemvThreads);
#pragma unroll
        for (int j = 0; j < 4; ++j) st[x_pad(f + j * kGemvThreads)] = v[j];
      }
      for (; f < n4; f += kGemvThreads) st[x_pad(f)] = __ldg(xt + f);
    }
    __syncthreads();
  }

  float acc[T][R];
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[t][r] = 0.0f;

  constexpr int kF4PerChunk = Fmt::kElemsPerChunk / 4;  // x float4s per weight chunk
  static_assert(kF4PerChunk == 4 || kF4PerChunk == 8, "x_pad offsets need F in {4, 8}");
  int f0 = static_cast<int>(c_first) * kF4PerChunk;
  int xl = x_pad(f0);  // kStageX: this lane's chunk in row 0 (float4 index: 32-bit addressing)
  for (int it = 0; it < iters; ++it) {
    uint4 raw[R];
    float s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      raw[r] = next[r];
      s[r] = e8m0_to_float(next_scale[Fmt::kScaleSharedByRows ? 0 : r]);
      wp[r] += 32 * 16;
      sp[r] += Fmt::kScaleStep;
    }
    if (it + 1 < iters) {  // in flight while this chunk is decoded and multiplied
#pragma unroll
      for (int r = 0; r < R; ++r) next[r] = load_stream_u4(wp[r]);
#pragma unroll
      for (int r = 0; r < kScales; ++r) next_scale[r] = __ldg(sp[r]);
    }
#pragma unroll
    for (int sub = 0; sub < Fmt::kSubChunks; ++sub) {
      // The 16 x values of activation row t at this sub-chunk.
      auto load_x = [&](int t, float(&xv)[16]) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int f = f0 + 4 * sub + q;
          const float4 v = kStageX ? xs[xl + t * sx4 + 4 * sub + q]
                                   : __ldg(reinterpret_cast<const float4*>(x) + t * xs4 + f);
          xv[4 * q + 0] = v.x;
          xv[4 * q + 1] = v.y;
          xv[4 * q + 2] = v.z;
          xv[4 * q + 3] = v.w;
        }
      };
      if constexpr (T == 2 && R >= 4) {
        // Both x rows held (32 registers) and one weight row decoded at a time: R decoded rows
        // at once (R · 16 registers) spilled this instance (ptxas sm_90 60 bytes for the RoPE
        // multi-job kernel; sm_121 40-56). The same dot16 and fmaf per (t, r): the same bits.
        float xv[2][16];
        load_x(0, xv[0]);
        if (rows > 1) load_x(1, xv[1]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float wf[16];
          Fmt::decode(raw[r], sub, wf);
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            if (t < rows) {
              const float p = dot16(wf, xv[t]) * Fmt::kScalePostMul;
              acc[t][r] = fmaf(p, s[r], acc[t][r]);
            }
          }
        }
      } else {
        float wf[R][16];
#pragma unroll
        for (int r = 0; r < R; ++r) Fmt::decode(raw[r], sub, wf[r]);
#pragma unroll
        for (int t = 0; t < T; ++t) {
          if (t < rows) {
            float xv[16];
            load_x(t, xv);
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const float p = dot16(wf[r], xv) * Fmt::kScalePostMul;
              acc[t][r] = fmaf(p, s[r], acc[t][r]);
            }
          }
        }
      }
    }
    f0 += 32 * kF4PerChunk;
    xl += 36 * kF4PerChunk;  // x_pad(f0 + 32 F) - x_pad(f0)
  }

#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 16; m >= 1; m >>= 1) acc[t][r] += __shfl_xor_sync(0xFFFFFFFFu, acc[t][r], m);

  if (ksplit == 1) {
    if (rope.inv_freq != nullptr) {  // every lane holds every total (butterfly): same rotation
      static_assert(R % 2 == 0, "rope pairs need even rows per warp");
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int r = 0; r < R; r += 2) gemv_rope_pair(rope, o0 + r, t, acc[t][r], acc[t][r + 1]);
    }
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (lane == ((t * R + r) & 31) && t < rows && o0 + r < out)
          y[t * y_stride + o0 + r] = acc[t][r];
    return;
  }
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (lane == ((t * R + r) & 31)) red[warp][t * R + r] = acc[t][r];
  __syncthreads();
  for (int i = threadIdx.x; i < groups * T * R; i += kGemvThreads) {
    const int g = i / (T * R), idx = i % (T * R), t = idx / R, r = idx % R;
    const int64_t o = (block * groups + g) * R + r;
    float v = 0.0f;
    for (int p = 0; p < ksplit; ++p) v += red[g * ksplit + p][idx];
    if (rope.inv_freq != nullptr) {
      // Row pairs sit in lane pairs (T·R even: i and idx and r share parity); both lanes rotate.
      const float partner = __shfl_xor_sync(__activemask(), v, 1);
      float even = (r & 1) ? partner : v, odd = (r & 1) ? v : partner;
      gemv_rope_pair(rope, o - (r & 1), t, even, odd);
      v = (r & 1) ? odd : even;
    }
    if (t < rows && o < out) y[t * y_stride + o] = v;
  }
}

// groups > 1: the block-diagonal (grouped) GEMV, group g of `groups` = output rows
// [g·out, (g+1)·out) of w times x columns [g·in, (g+1)·in): x [rows, groups·in], y [rows,
// groups·out]; blocks [g·blocks_per_group, ...) own group g (out % 32 == 0 for FP8's row blocks).
template <class Fmt, int T, int R, bool kStageX>
__global__ void __launch_bounds__(kGemvThreads, T == 1 ? 4 : 2)
    quant_gemv_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                      const uint8_t* __restrict__ scale, float* __restrict__ y, int rows,
                      int64_t out, int64_t in, int ksplit, int groups, int64_t blocks_per_group) {
  const int64_t g = blockIdx.x / blocks_per_group, b = blockIdx.x % blocks_per_group;
  const int64_t row_bytes = in * 16 / Fmt::kElemsPerChunk;
  quant_gemv_block<Fmt, T, R, kStageX>(x + g * in, w + g * out * row_bytes,
                                       Fmt::scale_ptr(scale, g * out, 0, in), y + g * out, rows,
                                       out, in, ksplit, b, groups * in, groups * out);
}

// Several weights of one format that read the same x [rows, in] (the projections of one
// normalised activation, spec §2.2 steps 1-3): one launch, blocks [first[j], first[j + 1]) own
// job j. Fewer launches and one larger read per step than a launch per weight (the small ones,
// 0.5-3 MB, ran at ~0.6-1.6 TB/s alone: docs/perf.md).
inline constexpr int kGemvMaxJobs = 8;
struct GemvJobs {
  const uint8_t* w[kGemvMaxJobs];
  const uint8_t* scale[kGemvMaxJobs];
  float* y[kGemvMaxJobs];  // [rows, out[j]]
  int64_t out[kGemvMaxJobs];
  int64_t first[kGemvMaxJobs];  // first block of job j (first[0] = 0)
  GemvRope rope0;               // job 0's epilogue (the kRope0 instances of the kernel)
  int n;
};

// kRope0: job 0 rotates its output (GemvJobs::rope0, read from the parameter space in the
// epilogue; a separate instance so the other launches carry no rope registers).
template <class Fmt, int T, int R, bool kStageX, bool kRope0>
__global__ void __launch_bounds__(kGemvThreads, T == 1 ? 4 : 2)
    quant_gemv_multi_kernel(const float* __restrict__ x, const __grid_constant__ GemvJobs jobs,
                            int rows, int64_t in, int ksplit) {
  // Static indices only (unrolled): a runtime index into the parameter arrays would copy them to
  // local memory.
  const int64_t b = blockIdx.x;
  const uint8_t* w = jobs.w[0];
  const uint8_t* sc = jobs.scale[0];
  float* y = jobs.y[0];
  int64_t out = jobs.out[0], first = 0;
#pragma unroll
  for (int j = 1; j < kGemvMaxJobs; ++j) {
    if (j < jobs.n && b >= jobs.first[j]) {
      w = jobs.w[j];
      sc = jobs.scale[j];
      y = jobs.y[j];
      out = jobs.out[j];
      first = jobs.first[j];
    }
  }
  if (kRope0 && first == 0) {
    quant_gemv_block<Fmt, T, R, kStageX>(x, w, sc, y, rows, out, in, ksplit, b, in, out,
                                         jobs.rope0);
  } else {
    quant_gemv_block<Fmt, T, R, kStageX>(x, w, sc, y, rows, out, in, ksplit, b - first, in, out);
  }
}

// Warps that share one row group: doubled while the grid has fewer than 32 warps per SM and each
// warp keeps at least one chunk per lane.
inline int gemv_ksplit(int64_t row_groups, int64_t chunks, int sm_count) {
  int ksplit = 1;
  while (ksplit < kGemvWarps && row_groups * ksplit < int64_t{32} * sm_count &&
         chunks >= int64_t{64} * ksplit)
    ksplit *= 2;
  return ksplit;
}

// x is staged in shared memory when it fits the default 48 KB per block beside the kernel's static
// reduction buffer (no opt-in, so the same rule holds on GB10's 99 KB): staged_x_bytes(rows, in) +
// kGemvWarps · T · R · 4, e.g. in = 1280 up to 8 rows, in = 5120 2 rows, in = 8192 1 row.
// (Counting x alone let rows · in · 4 = exactly 48 KB through — Engram's wkv, in = 6144 at 2 rows
// — and the launch failed with cudaErrorInvalidValue.)
inline constexpr int64_t kGemvStageXBytes = 48 * 1024;
template <int T, int R>
constexpr int64_t gemv_stage_limit() {
  return kGemvStageXBytes - int64_t{kGemvWarps} * T * R * 4;
}

template <class Fmt, int T, int R>
cudaError_t launch_quant_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                              int rows, int64_t out, int64_t in, int groups, cudaStream_t stream) {
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      e != cudaSuccess)
    return e;
  const int64_t row_groups = (out + R - 1) / R;
  const int ksplit = gemv_ksplit(row_groups * groups, in / Fmt::kElemsPerChunk, sms);
  const int groups_per_block = kGemvWarps / ksplit;
  const int64_t per_group = (row_groups + groups_per_block - 1) / groups_per_block;
  const int64_t blocks = per_group * groups;
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const int64_t x_bytes = staged_x_bytes(rows, in);
  const unsigned grid = static_cast<unsigned>(blocks);
  if (T <= 8 && x_bytes <= gemv_stage_limit<T, R>()) {
    (void)launch_kernel(quant_gemv_kernel<Fmt, T, R, (T <= 8)>, grid, kGemvThreads, x_bytes, stream,
                        x, w, scale, y, rows, out, in, ksplit, groups, per_group);
  } else {
    (void)launch_kernel(quant_gemv_kernel<Fmt, T, R, false>, grid, kGemvThreads, 0, stream, x, w,
                        scale, y, rows, out, in, ksplit, groups, per_group);
  }
  return cudaGetLastError();
}

// jobs.w/scale/y/out/n set by the caller; first[] is filled here. One k split for every job,
// chosen from the row groups of all of them (the grid is one launch).
template <class Fmt, int T, int R>
cudaError_t launch_quant_gemv_multi(const float* x, GemvJobs jobs, int rows, int64_t in,
                                    cudaStream_t stream) {
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      e != cudaSuccess)
    return e;
  int64_t row_groups = 0;
  for (int j = 0; j < jobs.n; ++j) row_groups += (jobs.out[j] + R - 1) / R;
  const int ksplit = gemv_ksplit(row_groups, in / Fmt::kElemsPerChunk, sms);
  const int groups_per_block = kGemvWarps / ksplit;
  int64_t blocks = 0;
  for (int j = 0; j < kGemvMaxJobs; ++j) {
    jobs.first[j] = blocks;
    if (j < jobs.n) blocks += ((jobs.out[j] + R - 1) / R + groups_per_block - 1) / groups_per_block;
  }
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const int64_t x_bytes = staged_x_bytes(rows, in);
  const unsigned grid = static_cast<unsigned>(blocks);
  const bool stage = T <= 8 && x_bytes <= gemv_stage_limit<T, R>();
  const bool rope = jobs.rope0.inv_freq != nullptr;
  auto kernel = stage ? (rope ? quant_gemv_multi_kernel<Fmt, T, R, (T <= 8), true>
                              : quant_gemv_multi_kernel<Fmt, T, R, (T <= 8), false>)
                      : (rope ? quant_gemv_multi_kernel<Fmt, T, R, false, true>
                              : quant_gemv_multi_kernel<Fmt, T, R, false, false>);
  (void)launch_kernel(kernel, grid, kGemvThreads, stage ? x_bytes : 0, stream, x, jobs, rows, in,
                      ksplit);
  return cudaGetLastError();
}

// The one runtime -> compile-time dispatch of the family: rows -> the smallest instantiated T.
// Fewer output rows per warp (R) for larger T keeps acc[T][R] + wf[R][16] in registers.
// __launch_bounds__ caps registers so several blocks share an SM: 128 (2 blocks, 16 warps) for
// T >= 2 (at 1 block the fp8 wq_b GEMV with 2 rows took 33.7 us instead of 25.7 us, H200) and 64
// (4 blocks) for T = 1 with R = 2 (no spills; docs/perf.md has the occupancy measurements).
template <class Fmt, class Run>
cudaError_t dispatch_gemv_rows(int rows, const Run& run) {
  // Under the 128-register cap of 2 blocks per SM, R = 4 spills (ptxas) for FP4 from T = 2 on
  // (two sub-chunks per chunk) and for FP8 at T = 4; T = 2 FP8 keeps R = 4.
  constexpr int kR2 = Fmt::kSubChunks == 1 ? 4 : 2;
  using std::integral_constant;
  if (rows <= 1) return run(integral_constant<int, 1>{}, integral_constant<int, 2>{});
  if (rows <= 2) return run(integral_constant<int, 2>{}, integral_constant<int, kR2>{});
  if (rows <= 4) return run(integral_constant<int, 4>{}, integral_constant<int, 2>{});
  if (rows <= 8) return run(integral_constant<int, 8>{}, integral_constant<int, 2>{});
  return run(integral_constant<int, 16>{}, integral_constant<int, 2>{});
}

template <class Fmt>
cudaError_t dispatch_quant_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                                int rows, int64_t out, int64_t in, cudaStream_t stream,
                                int groups = 1) {
  return dispatch_gemv_rows<Fmt>(rows, [&](auto t, auto r) {
    return launch_quant_gemv<Fmt, decltype(t)::value, decltype(r)::value>(x, w, scale, y, rows, out,
                                                                          in, groups, stream);
  });
}

template <class Fmt>
cudaError_t dispatch_quant_gemv_multi(const float* x, const GemvJobs& jobs, int rows, int64_t in,
                                      cudaStream_t stream) {
  return dispatch_gemv_rows<Fmt>(rows, [&](auto t, auto r) {
    return launch_quant_gemv_multi<Fmt, decltype(t)::value, decltype(r)::value>(x, jobs, rows, in,
                                                                                stream);
  });
}

// Shape and alignment rules shared by both formats; false -> cudaErrorInvalidValue. (in <= 2^28
// keeps the kernel's x indices, rows · in / 4, in 32 bits.)
inline bool gemv_args_ok(const float* x, const uint8_t* w, const uint8_t* scale, const float* y,
                         int rows, int64_t out, int64_t in, int64_t in_multiple) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return x && w && scale && y && rows >= 1 && rows <= 16 && out >= 1 && in >= in_multiple &&
         in <= (int64_t{1} << 28) && in % in_multiple == 0 && aligned16(x) && aligned16(w) &&
         static_cast<const void*>(x) != y;
}

}  // namespace dsv41::kernels::detail
