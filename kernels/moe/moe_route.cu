// §4 router: moe_route, one warp per token (moe/route_warp.cuh holds the op sequence and why).
#include <cmath>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"
#include "moe/route_warp.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// One warp per token, kWarps tokens per block (the block-per-token version spent its time in
// 2·k __syncthreads per token: k = 6 at decode).
__global__ void __launch_bounds__(kThreads) route_kernel(const detail::RouteParams p, int64_t T) {
  detail::pdl_begin();
  __shared__ float score_s[kWarps][kMoeMaxExperts], biased_s[kWarps][kMoeMaxExperts];
  __shared__ int order_s[kWarps][kMoeMaxTopK];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (t >= T) return;  // whole warps: no block barrier below
  detail::route_token(p, t, lane, score_s[warp], biased_s[warp], order_s[warp]);
}

}  // namespace

cudaError_t moe_route(const float* logits, const float* bias, const float* bias_vl,
                      const uint8_t* image_flags, int32_t* ids, float* weights,
                      float* biased_scores, int64_t T, int E, int k, float gate_temp,
                      bool norm_topk_prob, float routed_scaling_factor, cudaStream_t stream) {
  if (logits == nullptr || bias == nullptr || ids == nullptr || weights == nullptr || T < 0 ||
      E < 1 || E > kMoeMaxExperts || k < 1 || k > E || k > kMoeMaxTopK ||
      !std::isfinite(gate_temp) || !(gate_temp > 0.0f) || (image_flags && bias_vl == nullptr) ||
      T > 0x7FFFFFFF)
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const detail::RouteParams p{logits, bias,      bias_vl,        image_flags,
                              ids,    weights,   biased_scores,  E,
                              k,      gate_temp, norm_topk_prob, routed_scaling_factor};
  return detail::launch_kernel(route_kernel, static_cast<unsigned>((T + kWarps - 1) / kWarps),
                               kThreads, 0, stream, p, T);
}

}  // namespace dsv41::kernels
