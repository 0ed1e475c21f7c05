// One mHC site's work before its sublayer (spec model-architecture.md §3): the mixes of H
// (= hc_mixes) and the sublayer input xn = rms_norm(hc_collapse(H, pre_prev)) · w, with the CPU
// reference's op sequences (model/mhc.cpp, model/rms_norm.cpp), as two kernels: the collapse
// (hc_site_collapse.cu; with hc_expand_site it first writes H_new = hc_expand(...) where it reads
// it) and the mixes (here). xn needs only the previous site's pre, so the forward pass runs the
// mixes on a second stream beside the sublayer (hc_site_collapse / hc_site_mixes); hc_site and
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
#include "mhc/hc_site_args.cuh"

namespace dsv41::kernels {
namespace {

using detail::site::align256;
using detail::site::Args;
using detail::site::collapse_region_bytes;
using detail::site::collapse_region_offset;
using detail::site::kThreads;
using detail::site::workspace_fits;

// Projection blocks aimed at per call: 4 per SM of a 132-SM H200, 11 per SM of a 48-SM GB10; a
// split keeps >= 1024 values (4 per thread) so its fixed costs stay below its loads.
constexpr int64_t kTargetBlocks = 528;
constexpr int64_t kMaxSplits = 16;
constexpr int64_t kMinSplitValues = 1024;

int64_t splits_for(int64_t T, int mix, int64_t flat) {
  const int64_t want = (kTargetBlocks + T * mix - 1) / (T * mix);
  return std::max<int64_t>(1, std::min({want, kMaxSplits, flat / kMinSplitValues}));
}

// Workspace of one call: counters [T] uint32, dot partials [T, mix, S] and ss partials [T, S]
// fp64.
size_t bytes_for(int64_t T, int mix, int64_t S) {
  return align256(static_cast<size_t>(T) * 4) + static_cast<size_t>(T * mix * S + T * S) * 8;
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
  if (const cudaError_t e = detail::site::launch_collapse(a, workspace, workspace_bytes, stream);
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
