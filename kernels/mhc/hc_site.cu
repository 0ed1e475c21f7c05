// One mHC site's work before its sublayer (spec model-architecture.md §3): the mixes of H
// (= hc_mixes) and the sublayer input xn = rms_norm(hc_collapse(H, pre_prev)) · w, with the CPU
// reference's op sequences (model/mhc.cpp, model/rms_norm.cpp), as two kernels: the collapse
// (one block per token; with hc_expand_site it first writes H_new = hc_expand(...) where it reads
// it) and the mixes. xn needs only the previous site's pre, so the forward pass runs the mixes on
// a second stream beside the sublayer (hc_site_collapse / hc_site_mixes); hc_site and
// hc_expand_site queue both on one stream. At decode the four kernels before them (24-block
// projection, finish, collapse, norm) were ~33 us per site, 80 sites a step (docs/perf.md).
//
// Mixes, decode: T · mix · S projection blocks: block (t, r, s) sums the fp64 dot of mix row r and
// the fp64 sum of squares over split s of the flattened streams and stores the partials; the last
// block of token t to arrive (atomic counter, reset to 0 by it) adds the partials in split order,
// forms m_r and runs the finish (sigmoids, Sinkhorn) with one warp. Deterministic: every sum has a
// fixed order; the fp64 totals differ from the reference's sequential sums only by fp64 rounding
// (~1e-16 relative), as hc_mixes' do.
//
// Mixes, prefill (T >= kTileMinTokens, mix <= kTileRows): the split grid degenerates to one block
// per (token, row), each streaming the token's 80 KB of H and the row's 80 KB of fn (1.02 ms per
// site at T 2048 on an H100: 7.9 GB through L2). hc_site_tiled_kernel instead gives a block
// kTileTokens tokens and every mix row: H chunks of those tokens staged in shared memory, warp w
// owning rows [3w, 3w + 3), each lane summing a strided slice in fp64 then a shuffle tree (another
// fixed order: the same fp64-rounding-level difference), and warp j finishing token j, so fn
// goes through L2 once per kTileTokens tokens and no workspace or counter is needed.
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/mhc.hpp"
#include "mhc/hc_mix_ops.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
// Projection blocks aimed at per call: 4 per SM of a 132-SM H200, 11 per SM of a 48-SM GB10; a
// split keeps >= 1024 values (4 per thread) so its fixed costs stay below its loads.
constexpr int64_t kTargetBlocks = 528;
constexpr int64_t kMaxSplits = 16;
constexpr int64_t kMinSplitValues = 1024;

int64_t splits_for(int64_t T, int mix, int64_t flat) {
  const int64_t want = (kTargetBlocks + T * mix - 1) / (T * mix);
  return std::max<int64_t>(1, std::min({want, kMaxSplits, flat / kMinSplitValues}));
}

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

// Workspace of one call: counters [T] uint32, dot partials [T, mix, S] and ss partials [T, S]
// fp64.
size_t bytes_for(int64_t T, int mix, int64_t S) {
  return align256(static_cast<size_t>(T) * 4) + static_cast<size_t>(T * mix * S + T * S) * 8;
}

// Values per thread whose loads are issued together: at decode one block per token walks D = 5120
// in 20 steps of 256 threads, each an L2 round trip if it waited for its own loads. The
// per-thread order of every sum is that of one value at a time.
constexpr int kBatch = 4;

// The split collapse (decode) gets its own region at the end of the workspace, so it can run
// beside the mixes of the previous site that use the start: counters [kSplitMaxTokens] uint32,
// Σx² partials [kSplitMaxTokens, S] fp64, S = ceil(D / kSliceValues).
constexpr int64_t kSplitMaxTokens = 16;
constexpr int64_t kSliceValues = int64_t{kBatch} * kThreads;  // one batch of loads per thread
int64_t slices_for(int64_t D) { return (D + kSliceValues - 1) / kSliceValues; }
size_t collapse_region_bytes(int64_t D) {
  return align256(kSplitMaxTokens * 4 + static_cast<size_t>(kSplitMaxTokens * slices_for(D)) * 8);
}
// Byte offset of that region in a workspace of `bytes` (a multiple of 256 from the start).
size_t collapse_region_offset(size_t bytes, int64_t D) {
  return (bytes - collapse_region_bytes(D)) / 256 * 256;
}

struct Args {
  const float* H;  // [T, hc, D]
  const float* fn;
  const float* base;
  const float* scale;
  const float* pre_prev;  // [T, hc]
  const float* norm_w;    // [D] or null
  float* pre;
  float* post;
  float* comb;
  float* xn;  // [T, D]
  uint32_t* counters;
  double* dot_part;
  double* ss_part;
  int64_t T, D, flat, S, chunk;
  int hc, mix, iters;
  float hc_eps, norm_eps;
  // Folded expand (collapse kernel only): H is H_new = hc_expand(y, H_old, post_prev, comb_prev),
  // written by the collapse blocks (null y: H is an input).
  const float* y;
  const float* H_old;
  const float* post_prev;
  const float* comb_prev;
  float* H_new;
};

// x = Σ_j pre_prev[t, j] · H[t, j, :] (acc from 0, j ascending, unfused: hc_collapse) for d in
// [begin, end), written to xn (normalised later); returns this thread's fp64 Σx² over its
// elements begin + threadIdx.x + k·kThreads in k order. With the folded expand it also writes
// the token's H_new there (hc_expand.cu's op sequence: acc = post·y, then j ascending, unfused,
// so the folded site sees the bytes the separate launch would write). kHcCap >= a.hc bounds the
// per-thread stream arrays (4 for the released hc: 8 would double them and spill at 128
// registers).
template <int kHcCap>
__device__ __forceinline__ double collapse_range(const Args& a, int64_t t, int64_t begin,
                                                 int64_t end) {
  float p[kHcCap];
#pragma unroll
  for (int j = 0; j < kHcCap; ++j) p[j] = j < a.hc ? a.pre_prev[t * a.hc + j] : 0.0f;
  const bool fold = a.y != nullptr;
  const float* h = (fold ? a.H_old : a.H) + t * a.flat;
  const float* c = a.comb_prev + t * a.hc * a.hc;  // read only when fold
  const float* po = a.post_prev + t * a.hc;
  float* xr = a.xn + t * a.D;
  double ss = 0.0;
  constexpr int64_t kStep = int64_t{kBatch} * kThreads;
  for (int64_t d0 = begin + threadIdx.x; d0 < end; d0 += kStep) {
    // Every load of the batch first (H_new / xn stores could alias them for the compiler).
    float hv[kBatch][kHcCap], yv[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t d = d0 + u * kThreads;
      const bool in = d < end;
#pragma unroll
      for (int j = 0; j < kHcCap; ++j) hv[u][j] = (in && j < a.hc) ? h[j * a.D + d] : 0.0f;
      yv[u] = (in && fold) ? a.y[t * a.D + d] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t d = d0 + u * kThreads;
      if (d >= end) break;
      float v[kHcCap];
      if (fold) {
#pragma unroll
        for (int k = 0; k < kHcCap; ++k) {
          float acc = 0.0f;
          if (k < a.hc) {
            acc = __fmul_rn(po[k], yv[u]);
#pragma unroll
            for (int j = 0; j < kHcCap; ++j)
              if (j < a.hc) acc = __fadd_rn(acc, __fmul_rn(c[j * a.hc + k], hv[u][j]));
            a.H_new[t * a.flat + k * a.D + d] = acc;
          }
          v[k] = acc;
        }
      } else {
#pragma unroll
        for (int j = 0; j < kHcCap; ++j) v[j] = hv[u][j];
      }
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kHcCap; ++j)  // unrolled: p stays in registers
        if (j < a.hc) acc = __fadd_rn(acc, __fmul_rn(p[j], v[j]));
      xr[d] = acc;
      const double dv = acc;
      ss += dv * dv;
    }
  }
  return ss;
}

// inv = 1 / sqrt(fp32(Σx² / D) + eps) (rms_norm's fp32 tail); xn = (x · inv) · w over the row.
__device__ __forceinline__ float rms_inverse(double total, int64_t D, float eps) {
  const float mean = static_cast<float>(total / static_cast<double>(D));
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
}

// kCg: xn rows written by other blocks of the grid are read through L2 (__ldcg), not L1.
template <bool kCg>
__device__ __forceinline__ void normalize_row(const Args& a, int64_t t, float inv) {
  float* xr = a.xn + t * a.D;
  constexpr int64_t kStep = int64_t{kBatch} * kThreads;
  for (int64_t d0 = threadIdx.x; d0 < a.D; d0 += kStep) {
    float xv[kBatch], wv[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t d = d0 + u * kThreads;
      xv[u] = d < a.D ? (kCg ? __ldcg(xr + d) : xr[d]) : 0.0f;
      wv[u] = (d < a.D && a.norm_w != nullptr) ? a.norm_w[d] : 1.0f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t d = d0 + u * kThreads;
      if (d >= a.D) break;
      const float v = __fmul_rn(xv[u], inv);
      xr[d] = a.norm_w != nullptr ? __fmul_rn(v, wv[u]) : v;
    }
  }
}

// One block per token (prefill): the collapse over the whole row, the block's Σx², the norm.
// Each thread re-reads only the xn elements it wrote.
template <int kHcCap>
__global__ void __launch_bounds__(kThreads, 2) hc_collapse_kernel(const __grid_constant__ Args a) {
  detail::pdl_begin();
  __shared__ double part[2 * kThreads / 32];
  __shared__ float inv_s;
  const int64_t t = blockIdx.x;
  double ss = collapse_range<kHcCap>(a, t, 0, a.D), unused = 0.0;
  hcm::block_sum2<kThreads>(ss, unused, part);
  if (threadIdx.x == 0) inv_s = rms_inverse(ss, a.D, a.norm_eps);
  __syncthreads();
  normalize_row<false>(a, t, inv_s);
}

// Decode (T <= kSplitMaxTokens): block (s, t) collapses slice s of a.chunk = kThreads · kBatch
// values of token t (one batch of loads per thread) and stores its block's Σx²; the last block of
// the token to arrive (atomic counter, reset by it) adds the S partials in slice order and
// normalises the whole row from L2. One block per token walked 5120 values in 5 dependent
// batches and then normalised them: 15.7 us per site under ncu on the critical path (docs/
// perf.md stop 29).
template <int kHcCap>
__global__ void __launch_bounds__(kThreads, 2)
    hc_collapse_split_kernel(const __grid_constant__ Args a) {
  detail::pdl_begin();
  __shared__ double part[2 * kThreads / 32];
  __shared__ float inv_s;
  __shared__ int last;
  const int64_t s = blockIdx.x, t = blockIdx.y;
  const int64_t begin = s * a.chunk, end = min(a.D, begin + a.chunk);
  double ss = collapse_range<kHcCap>(a, t, begin, end), unused = 0.0;
  hcm::block_sum2<kThreads>(ss, unused, part);
  if (threadIdx.x == 0) {
    __stcg(a.ss_part + t * a.S + s, ss);
    __threadfence();
    last = atomicAdd(a.counters + t, 1u) == static_cast<uint32_t>(a.S - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other slices' xn and partials are visible
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int64_t i = 0; i < a.S; ++i) total += __ldcg(a.ss_part + t * a.S + i);
    inv_s = rms_inverse(total, a.D, a.norm_eps);
    a.counters[t] = 0;  // ready for the next call
  }
  __syncthreads();
  normalize_row<true>(a, t, inv_s);
}

__global__ void __launch_bounds__(kThreads) hc_site_kernel(const __grid_constant__ Args a) {
  detail::pdl_begin();
  __shared__ double part[2 * kThreads / 32];
  __shared__ float l[hcm::kHcMaxEntries];
  __shared__ int last;
  const int64_t pb = blockIdx.x, per_token = a.mix * a.S;
  const int64_t t = pb / per_token, rem = pb % per_token;
  const int r = static_cast<int>(rem / a.S);
  const int64_t s = rem % a.S;
  const int64_t begin = s * a.chunk, end = min(a.flat, begin + a.chunk);
  double dot = 0.0, ss = 0.0;
  const float* fr = a.fn + static_cast<int64_t>(r) * a.flat;
  hcm::dot_and_squares<kThreads>(a.H + t * a.flat, fr, begin, end, dot, ss);
  hcm::block_sum2<kThreads>(dot, ss, part);
  if (threadIdx.x == 0) {
    __stcg(a.dot_part + (t * a.mix + r) * a.S + s, dot);
    if (r == 0) __stcg(a.ss_part + t * a.S + s, ss);
    __threadfence();
    last = atomicAdd(a.counters + t, 1u) == static_cast<uint32_t>(per_token - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x < a.mix) {
    double total_ss = 0.0, total_dot = 0.0;
    for (int64_t i = 0; i < a.S; ++i) {
      total_ss += __ldcg(a.ss_part + t * a.S + i);
      total_dot += __ldcg(a.dot_part + (t * a.mix + threadIdx.x) * a.S + i);
    }
    *hcm::mix_slot(a.pre, a.post, a.comb, t, a.hc, threadIdx.x) =
        hcm::mix_value(total_dot, total_ss, a.flat, a.norm_eps);
  }
  if (threadIdx.x == 0) a.counters[t] = 0;  // ready for the next call
  __syncthreads();
  if (threadIdx.x < 32)
    hcm::finish_warp(a.base, a.scale, a.pre, a.post, a.comb, t, a.hc, a.iters, a.hc_eps,
                     threadIdx.x, l);
}

constexpr int kTileTokens = 8;  // one per warp: warp j finishes token j
// From this many tokens the tiled kernel runs: below it the split grid still spreads a site over
// many SMs, while one tile block is ~40 us of fp64 FMAs on one SM whatever T is (an estimate from
// the H100's 64 fp64 FMA/clk/SM; the crossover was not measured).
constexpr int64_t kTileMinTokens = 64;
constexpr int kTileRowsPerWarp = 3;
constexpr int kTileRows = kTileRowsPerWarp * (kThreads / 32);  // 24: hc <= 4
constexpr int kTileChunk = 1024;                               // H values per token per stage

__global__ void __launch_bounds__(kThreads) hc_site_tiled_kernel(const __grid_constant__ Args a) {
  detail::pdl_begin();
  __shared__ float hs[kTileTokens][kTileChunk];
  __shared__ double dots[kTileTokens][kTileRows];
  __shared__ double sss[kTileTokens];
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kTileTokens;
  const int nt = static_cast<int>(min(int64_t{kTileTokens}, a.T - t0));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r0 = warp * kTileRowsPerWarp;
  double dot[kTileRowsPerWarp][kTileTokens] = {}, ss[kTileTokens] = {};
  for (int64_t c0 = 0; c0 < a.flat; c0 += kTileChunk) {
    const int n = static_cast<int>(min(int64_t{kTileChunk}, a.flat - c0));
    for (int e = threadIdx.x; e < kTileTokens * kTileChunk; e += kThreads) {
      const int tt = e / kTileChunk, i = e % kTileChunk;
      hs[tt][i] = (tt < nt && i < n) ? a.H[(t0 + tt) * a.flat + c0 + i] : 0.0f;
    }
    __syncthreads();
    for (int i = lane; i < n; i += 32) {
      float f[kTileRowsPerWarp];
#pragma unroll
      for (int q = 0; q < kTileRowsPerWarp; ++q)
        f[q] = r0 + q < a.mix ? a.fn[static_cast<int64_t>(r0 + q) * a.flat + c0 + i] : 0.0f;
#pragma unroll
      for (int tt = 0; tt < kTileTokens; ++tt) {
        const double x = hs[tt][i];
        ss[tt] += x * x;
#pragma unroll
        for (int q = 0; q < kTileRowsPerWarp; ++q) dot[q][tt] += static_cast<double>(f[q]) * x;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int tt = 0; tt < kTileTokens; ++tt) {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
      ss[tt] += __shfl_xor_sync(0xFFFFFFFFu, ss[tt], m);
#pragma unroll
      for (int q = 0; q < kTileRowsPerWarp; ++q)
        dot[q][tt] += __shfl_xor_sync(0xFFFFFFFFu, dot[q][tt], m);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int tt = 0; tt < kTileTokens; ++tt) {
      if (warp == 0) sss[tt] = ss[tt];
#pragma unroll
      for (int q = 0; q < kTileRowsPerWarp; ++q) dots[tt][r0 + q] = dot[q][tt];
    }
  }
  __syncthreads();
  if (warp >= nt) return;
  const int64_t t = t0 + warp;
  if (lane < a.mix)
    *hcm::mix_slot(a.pre, a.post, a.comb, t, a.hc, lane) =
        hcm::mix_value(dots[warp][lane], sss[warp], a.flat, a.norm_eps);
  __syncwarp();
  hcm::finish_warp(a.base, a.scale, a.pre, a.post, a.comb, t, a.hc, a.iters, a.hc_eps, lane,
                   reinterpret_cast<float*>(hs[warp]));
}

}  // namespace

size_t hc_site_workspace_bytes(int64_t max_T, int hc, int64_t D) {
  if (max_T < 1 || hc < 1 || hc > kHcMaxStreams || D < 1) return 0;
  const int mix = (2 + hc) * hc;
  size_t most = 0;
  for (int64_t T = 1; T <= max_T; ++T)
    most = std::max(most, bytes_for(T, mix, splits_for(T, mix, hc * D)));
  // The mixes' region, then the split collapse's (+ 256 for its alignment from the end).
  return align256(most) + collapse_region_bytes(D) + 256;
}

namespace {

bool mixes_args_ok(const float* fn, const float* base, const float* scale, float* pre, float* post,
                   float* comb, int64_t T, int hc, int64_t D, int sinkhorn_iters, void* workspace) {
  return fn != nullptr && base != nullptr && scale != nullptr && pre != nullptr &&
         post != nullptr && comb != nullptr && workspace != nullptr && T >= 0 && hc >= 1 &&
         hc <= kHcMaxStreams && D >= 1 && sinkhorn_iters >= 1 &&
         (reinterpret_cast<uintptr_t>(workspace) & 15) == 0;
}

bool site_args_ok(const float* fn, const float* base, const float* scale, const float* pre_prev,
                  float* pre, float* post, float* comb, float* xn, int64_t T, int hc, int64_t D,
                  int sinkhorn_iters, void* workspace) {
  return mixes_args_ok(fn, base, scale, pre, post, comb, T, hc, D, sinkhorn_iters, workspace) &&
         pre_prev != nullptr && xn != nullptr && pre_prev != pre;
}

// Both kernels' workspace regions fit: the split collapse's at the end, the mixes' before it.
bool workspace_fits(int64_t D, size_t workspace_bytes) {
  return workspace_bytes >= collapse_region_bytes(D) + 256;
}

// The collapse kernel: a.H (read; a.y set: a.H_new == a.H written first), pre_prev, norm_w, xn, T,
// hc, D, norm_eps set. Decode rows (T <= kSplitMaxTokens) take the split grid and the
// workspace's collapse region.
cudaError_t launch_collapse(Args a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (a.T > int64_t{0x7FFFFFFF} || !workspace_fits(a.D, workspace_bytes))
    return cudaErrorInvalidValue;
  a.flat = a.hc * a.D;
  if (a.T <= kSplitMaxTokens) {
    uint8_t* region =
        static_cast<uint8_t*>(workspace) + collapse_region_offset(workspace_bytes, a.D);
    a.counters = reinterpret_cast<uint32_t*>(region);
    a.ss_part = reinterpret_cast<double*>(region + kSplitMaxTokens * 4);
    a.S = slices_for(a.D), a.chunk = kSliceValues;
    const auto kernel =
        a.hc <= 4 ? hc_collapse_split_kernel<4> : hc_collapse_split_kernel<kHcMaxStreams>;
    return detail::launch_kernel(kernel,
                                 dim3(static_cast<unsigned>(a.S), static_cast<unsigned>(a.T)),
                                 kThreads, 0, stream, a);
  }
  const auto kernel = a.hc <= 4 ? hc_collapse_kernel<4> : hc_collapse_kernel<kHcMaxStreams>;
  return detail::launch_kernel(kernel, static_cast<unsigned>(a.T), kThreads, 0, stream, a);
}

bool tiled(int64_t T, int mix) { return T >= kTileMinTokens && mix <= kTileRows; }

// The mixes kernel's grid fits and (split grid) the workspace holds its partials.
bool mixes_fit(int64_t T, int hc, int64_t D, size_t workspace_bytes) {
  const int mix = (2 + hc) * hc;
  if (tiled(T, mix)) return (T + kTileTokens - 1) / kTileTokens <= int64_t{0x7FFFFFFF};
  const int64_t S = splits_for(T, mix, hc * D);
  return T <= int64_t{0x7FFFFFFF} / (mix * S) && workspace_fits(D, workspace_bytes) &&
         bytes_for(T, mix, S) <= collapse_region_offset(workspace_bytes, D);
}

// The mixes kernel on a.H: fn, base, scale, pre, post, comb, sizes set.
cudaError_t launch_mixes(Args a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int64_t T = a.T;
  const int mix = (2 + a.hc) * a.hc;
  const int64_t flat = a.hc * a.D, S = splits_for(T, mix, flat);
  a.flat = flat, a.mix = mix;
  if (!mixes_fit(T, a.hc, a.D, workspace_bytes)) return cudaErrorInvalidValue;
  if (tiled(T, mix)) {
    const int64_t tiles = (T + kTileTokens - 1) / kTileTokens;
    return detail::launch_kernel(hc_site_tiled_kernel, static_cast<unsigned>(tiles), kThreads, 0,
                                 stream, a);
  }
  auto* ws = static_cast<uint8_t*>(workspace);
  a.counters = reinterpret_cast<uint32_t*>(ws);
  a.dot_part = reinterpret_cast<double*>(ws + align256(static_cast<size_t>(T) * 4));
  a.ss_part = a.dot_part + T * mix * S;
  a.S = S, a.chunk = (flat + S - 1) / S;
  return detail::launch_kernel(hc_site_kernel, static_cast<unsigned>(T * mix * S), kThreads, 0,
                               stream, a);
}

// Both kernels on one stream (hc_site, hc_expand_site); a.y set folds the expand.
cudaError_t launch_site(Args a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (a.T > int64_t{0x7FFFFFFF} || !mixes_fit(a.T, a.hc, a.D, workspace_bytes))
    return cudaErrorInvalidValue;  // before anything is queued
  if (const cudaError_t e = launch_collapse(a, workspace, workspace_bytes, stream);
      e != cudaSuccess)
    return e;
  a.y = nullptr;  // the mixes read the H the collapse wrote
  return launch_mixes(a, workspace, workspace_bytes, stream);
}

Args site_args(const float* H, const float* fn, const float* base, const float* scale,
               const float* pre_prev, const float* norm_w, float* pre, float* post, float* comb,
               float* xn, int64_t T, int hc, int64_t D, int sinkhorn_iters, float hc_eps,
               float norm_eps) {
  Args a{};
  a.H = H, a.fn = fn, a.base = base, a.scale = scale, a.pre_prev = pre_prev, a.norm_w = norm_w;
  a.pre = pre, a.post = post, a.comb = comb, a.xn = xn;
  a.T = T, a.D = D, a.hc = hc, a.iters = sinkhorn_iters;
  a.hc_eps = hc_eps, a.norm_eps = norm_eps;
  return a;
}

}  // namespace

cudaError_t hc_site(const float* H, const float* fn, const float* base, const float* scale,
                    const float* pre_prev, const float* norm_w, float* pre, float* post,
                    float* comb, float* xn, int64_t T, int hc, int64_t D, int sinkhorn_iters,
                    float hc_eps, float norm_eps, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream) {
  if (H == nullptr || !site_args_ok(fn, base, scale, pre_prev, pre, post, comb, xn, T, hc, D,
                                    sinkhorn_iters, workspace))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  return launch_site(site_args(H, fn, base, scale, pre_prev, norm_w, pre, post, comb, xn, T, hc, D,
                               sinkhorn_iters, hc_eps, norm_eps),
                     workspace, workspace_bytes, stream);
}

cudaError_t hc_expand_site(const HcExpandIn& e, float* H_new, const float* fn, const float* base,
                           const float* scale, const float* pre_prev, const float* norm_w,
                           float* pre, float* post, float* comb, float* xn, int64_t T, int hc,
                           int64_t D, int sinkhorn_iters, float hc_eps, float norm_eps,
                           void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (e.y == nullptr || e.H_old == nullptr || e.post == nullptr || e.comb == nullptr ||
      H_new == nullptr || H_new == e.H_old ||
      !site_args_ok(fn, base, scale, pre_prev, pre, post, comb, xn, T, hc, D, sinkhorn_iters,
                    workspace))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  Args a = site_args(H_new, fn, base, scale, pre_prev, norm_w, pre, post, comb, xn, T, hc, D,
                     sinkhorn_iters, hc_eps, norm_eps);
  a.y = e.y, a.H_old = e.H_old, a.post_prev = e.post, a.comb_prev = e.comb, a.H_new = H_new;
  return launch_site(a, workspace, workspace_bytes, stream);
}

cudaError_t hc_site_collapse(const HcExpandIn* e, float* H, const float* pre_prev,
                             const float* norm_w, float* xn, int64_t T, int hc, int64_t D,
                             float norm_eps, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  if (H == nullptr || pre_prev == nullptr || xn == nullptr || T < 0 || hc < 1 ||
      hc > kHcMaxStreams || D < 1 || T > int64_t{0x7FFFFFFF} || workspace == nullptr ||
      (reinterpret_cast<uintptr_t>(workspace) & 15) != 0)
    return cudaErrorInvalidValue;
  if (e != nullptr && (e->y == nullptr || e->H_old == nullptr || e->post == nullptr ||
                       e->comb == nullptr || e->H_old == H))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  Args a{};
  a.H = H, a.H_new = H, a.pre_prev = pre_prev, a.norm_w = norm_w, a.xn = xn;
  a.T = T, a.D = D, a.hc = hc, a.norm_eps = norm_eps;
  if (e != nullptr) a.y = e->y, a.H_old = e->H_old, a.post_prev = e->post, a.comb_prev = e->comb;
  return launch_collapse(a, workspace, workspace_bytes, stream);
}

cudaError_t hc_site_mixes(const float* H, const float* fn, const float* base, const float* scale,
                          float* pre, float* post, float* comb, int64_t T, int hc, int64_t D,
                          int sinkhorn_iters, float hc_eps, float norm_eps, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream) {
  if (H == nullptr ||
      !mixes_args_ok(fn, base, scale, pre, post, comb, T, hc, D, sinkhorn_iters, workspace))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  return launch_mixes(site_args(H, fn, base, scale, nullptr, nullptr, pre, post, comb, nullptr, T,
                                hc, D, sinkhorn_iters, hc_eps, norm_eps),
                      workspace, workspace_bytes, stream);
}

}  // namespace dsv41::kernels
