// mHC mixes of one site (spec model-architecture.md §3 steps 1-6), as the CPU reference
// model/mhc.cpp (hc_mixes, hc_sinkhorn) computes them:
//   v = H[t] flattened [hc·D]; inv = 1 / sqrt(fp32(Σv² / n) + eps)   (Σ in fp64)
//   m_r = fp32(Σ_i fn[r, i]·v[i] (fp64) · inv)                         r < (2+hc)·hc
//   pre, post = sigmoids of m·scale + base; comb = Sinkhorn(m·scale2 + base) (20 iterations).
// Two kernels: hc_project (one block per (token, row r): the fp64 dot product and the fp64 sum
// of squares, reduced in a fixed order) writes m_r into the output slot it belongs to (pre,
// post or comb: exactly (2+hc)·hc floats per token), then hc_finish (one warp per token) applies
// the reference's fp32 op sequence in place (hc_mix_ops.cuh). hc_site.cu fuses the same pieces
// with the collapse and norm of a site for the forward pass.
#include "common/launch.cuh"
#include "dsv41k/mhc.hpp"
#include "mhc/hc_mix_ops.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kProjThreads = 512;
constexpr int kFinishWarps = 4;

__global__ void __launch_bounds__(kProjThreads)
    hc_project(const float* __restrict__ H, const float* __restrict__ fn, float* pre, float* post,
               float* comb, int hc, int64_t flat, float norm_eps) {
  detail::pdl_begin();
  __shared__ double part[2 * kProjThreads / 32];
  const int mix = (2 + hc) * hc;
  const int64_t t = blockIdx.x / mix;
  const int r = static_cast<int>(blockIdx.x % mix);
  double dot = 0.0, ss = 0.0;
  hcm::dot_and_squares<kProjThreads>(H + t * flat, fn + static_cast<int64_t>(r) * flat, 0, flat,
                                     dot, ss);
  hcm::block_sum2<kProjThreads>(dot, ss, part);
  if (threadIdx.x == 0)
    *hcm::mix_slot(pre, post, comb, t, hc, r) = hcm::mix_value(dot, ss, flat, norm_eps);
}

__global__ void __launch_bounds__(32 * kFinishWarps)
    hc_finish(const float* __restrict__ base, const float* __restrict__ scale, float* pre,
              float* post, float* comb, int64_t T, int hc, int iters, float hc_eps) {
  detail::pdl_begin();
  __shared__ float cs[kFinishWarps][hcm::kHcMaxEntries];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kFinishWarps + warp;
  if (t >= T) return;  // whole warps leave: only warp-level sync below
  hcm::finish_warp(base, scale, pre, post, comb, t, hc, iters, hc_eps, lane, cs[warp]);
}

}  // namespace

cudaError_t hc_mixes(const float* H, const float* fn, const float* base, const float* scale,
                     float* pre, float* post, float* comb, int64_t T, int hc, int64_t D,
                     int sinkhorn_iters, float hc_eps, float norm_eps, cudaStream_t stream) {
  if (H == nullptr || fn == nullptr || base == nullptr || scale == nullptr || pre == nullptr ||
      post == nullptr || comb == nullptr || T < 0 || hc < 1 || hc > kHcMaxStreams || D < 1 ||
      sinkhorn_iters < 1)
    return cudaErrorInvalidValue;
  const int64_t mix = static_cast<int64_t>(2 + hc) * hc;
  if (T > 0x7FFFFFFF / mix) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  (void)detail::launch_kernel(hc_project, static_cast<unsigned>(T * mix), kProjThreads, 0, stream,
                              H, fn, pre, post, comb, hc, hc * D, norm_eps);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const unsigned blocks = static_cast<unsigned>((T + kFinishWarps - 1) / kFinishWarps);
  return detail::launch_kernel(hc_finish, blocks, 32 * kFinishWarps, 0, stream, base, scale, pre,
                               post, comb, T, hc, sinkhorn_iters, hc_eps);
}

}  // namespace dsv41::kernels
