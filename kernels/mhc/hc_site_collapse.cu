// The collapse + norm kernel of an mHC site (spec model-architecture.md §3; the site's layout and
// why it is two kernels: hc_site.cu): xn = rms_norm(Σ_j pre_prev[t, j] · H[t, j, :]) · w with the
// CPU reference's op sequences (model/mhc.cpp, model/rms_norm.cpp), optionally writing H first
// as hc_expand of the previous sublayer's output.
#include <cooperative_groups.h>

#include "common/launch.cuh"
#include "dsv41k/mhc.hpp"
#include "mhc/hc_mix_ops.cuh"
#include "mhc/hc_site_args.cuh"

namespace dsv41::kernels {
namespace detail::site {
namespace {

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

// normalize_row over [begin, end) in collapse_range's element order: each thread re-reads only
// the xn elements it wrote (program order, no fence).
__device__ __forceinline__ void normalize_range(const Args& a, int64_t t, int64_t begin,
                                                int64_t end, float inv) {
  float* xr = a.xn + t * a.D;
  constexpr int64_t kStep = int64_t{kBatch} * kThreads;
  for (int64_t d0 = begin + threadIdx.x; d0 < end; d0 += kStep) {
    float xv[kBatch], wv[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t d = d0 + u * kThreads;
      xv[u] = d < end ? xr[d] : 0.0f;
      wv[u] = (d < end && a.norm_w != nullptr) ? a.norm_w[d] : 1.0f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t d = d0 + u * kThreads;
      if (d >= end) break;
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

// Decode with S <= kClusterMaxSlices: the split grid as one thread-block cluster per token (grid
// (S, T), cluster (S, 1, 1)). Block s collapses slice s, publishes its Σx² in shared memory, and
// after a cluster barrier every block adds the S partials in slice order from the cluster's
// shared memory (the counter kernel's sum, same bits) and normalises its own slice from the
// elements its threads just wrote. The counter kernel's last block instead normalised all D
// values after a global round trip: 10.4 us per site under ncu on an H100 (stop 32), 80 sites a
// step on the critical path.
template <int kHcCap>
__global__ void __launch_bounds__(kThreads, 2)
    hc_collapse_cluster_kernel(const __grid_constant__ Args a) {
  namespace cg = cooperative_groups;
  detail::pdl_begin();
  __shared__ double part[2 * kThreads / 32];
  __shared__ double block_ss;
  __shared__ float inv_s;
  const int64_t s = blockIdx.x, t = blockIdx.y;
  const int64_t begin = s * a.chunk, end = min(a.D, begin + a.chunk);
  double ss = collapse_range<kHcCap>(a, t, begin, end), unused = 0.0;
  hcm::block_sum2<kThreads>(ss, unused, part);
  if (threadIdx.x == 0) block_ss = ss;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's block_ss written (release / acquire at cluster scope)
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int64_t i = 0; i < a.S; ++i)
      total += *cluster.map_shared_rank(&block_ss, static_cast<unsigned>(i));
    inv_s = rms_inverse(total, a.D, a.norm_eps);
  }
  cluster.sync();  // the partials are read before any block exits; inv_s visible to the block
  normalize_range(a, t, begin, end, inv_s);
}

// Cluster launch needs sm_90+ and the device's support (cudaDevAttrClusterLaunch).
bool cluster_launch_supported() {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&v, cudaDevAttrClusterLaunch, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return v != 0;
}

}  // namespace

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
    if (a.S <= kClusterMaxSlices && cluster_launch_supported()) {
      const auto kernel =
          a.hc <= 4 ? hc_collapse_cluster_kernel<4> : hc_collapse_cluster_kernel<kHcMaxStreams>;
      return detail::launch_kernel_cluster(
          kernel, dim3(static_cast<unsigned>(a.S), static_cast<unsigned>(a.T)), kThreads, 0, stream,
          static_cast<unsigned>(a.S), a);
    }
    const auto kernel =
        a.hc <= 4 ? hc_collapse_split_kernel<4> : hc_collapse_split_kernel<kHcMaxStreams>;
    return detail::launch_kernel(kernel,
                                 dim3(static_cast<unsigned>(a.S), static_cast<unsigned>(a.T)),
                                 kThreads, 0, stream, a);
  }
  const auto kernel = a.hc <= 4 ? hc_collapse_kernel<4> : hc_collapse_kernel<kHcMaxStreams>;
  return detail::launch_kernel(kernel, static_cast<unsigned>(a.T), kThreads, 0, stream, a);
}

}  // namespace detail::site

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
  detail::site::Args a{};
  a.H = H, a.H_new = H, a.pre_prev = pre_prev, a.norm_w = norm_w, a.xn = xn;
  a.T = T, a.D = D, a.hc = hc, a.norm_eps = norm_eps;
  if (e != nullptr) a.y = e->y, a.H_old = e->H_old, a.post_prev = e->post, a.comb_prev = e->comb;
  return detail::site::launch_collapse(a, workspace, workspace_bytes, stream);
}

}  // namespace dsv41::kernels
