// Engram gate and residual update (spec model-architecture.md §5.3; CPU reference
// engram::apply_gate) on precomputed kv = W_kv·E. One block per (t, k): the three fp64 sums
// Σ H², Σ K², Σ H·qk·K over D (per-thread strided partials, then a fixed-order warp/block tree:
// deterministic, and only the summation order differs from the CPU, ~1e-16 relative), the gate
// in fp64 with the CPU's exact formula (IEEE sqrt and division), rounded once to fp32, then
// H[k, c] = H[k, c] + g·V[c] with separately rounded fp32 multiply and add, as the CPU does (an
// FMA would round once and differ). With the same kv the result is bit-equal unless g lands on the
// other side of an fp32 rounding boundary (then by <= 1 ulp of g, 2^-24).
#include "common/launch.cuh"
#include "dsv41k/engram.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxStreams = 8;
constexpr double kGateClamp = 1e-6;  // |dot| floor before the signed sqrt (HF-mod clamp_value)

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, o);
  return v;
}

__global__ void __launch_bounds__(kThreads)
    engram_gate_kernel(float* __restrict__ H, const float* __restrict__ kv,
                       const float* __restrict__ qk, const uint8_t* __restrict__ image_flags,
                       int hc, int64_t D, float eps) {
  detail::pdl_begin();
  const int64_t t = blockIdx.x / hc;
  const int k = static_cast<int>(blockIdx.x % hc);
  float* h = H + (t * hc + k) * D;
  const float* key = kv + t * (hc + 1) * D + k * D;
  const float* value = kv + t * (hc + 1) * D + hc * D;
  const float* q = qk + k * D;
  double s_h2 = 0.0, s_k2 = 0.0, s_dot = 0.0;
  for (int64_t c = threadIdx.x; c < D; c += kThreads) {
    const double hv = h[c], kvv = key[c];
    s_h2 += hv * hv;
    s_k2 += kvv * kvv;
    s_dot += __dmul_rn(__dmul_rn(hv, static_cast<double>(q[c])), kvv);
  }
  __shared__ double part[3][kWarps];
  __shared__ float gate_shared;
  s_h2 = warp_sum(s_h2);
  s_k2 = warp_sum(s_k2);
  s_dot = warp_sum(s_dot);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    part[0][warp] = s_h2;
    part[1][warp] = s_k2;
    part[2][warp] = s_dot;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double a = 0.0, b = 0.0, dot = 0.0;
    for (int w = 0; w < kWarps; ++w) {
      a += part[0][w];
      b += part[1][w];
      dot += part[2][w];
    }
    const double n = static_cast<double>(D);
    const double rstd = 1.0 / sqrt(a / n + eps) / sqrt(b / n + eps);
    dot *= rstd / sqrt(n);
    double gate = 0.0;
    if (image_flags == nullptr || image_flags[t] == 0) {
      const double mag = sqrt(fabs(dot) > kGateClamp ? fabs(dot) : kGateClamp);
      gate = 1.0 / (1.0 + exp(-copysign(mag, dot)));
    }
    gate_shared = static_cast<float>(gate);
  }
  __syncthreads();
  // The update runs at image positions too (g = 0): H + 0·V is what the CPU computes (-0 -> +0,
  // a non-finite V propagates).
  const float g = gate_shared;
  for (int64_t c = threadIdx.x; c < D; c += kThreads)
    h[c] = __fadd_rn(h[c], __fmul_rn(g, value[c]));
}

}  // namespace

cudaError_t engram_gate(float* H, const float* kv, const float* qk, const uint8_t* image_flags,
                        int64_t T, int hc, int64_t D, float eps, cudaStream_t stream) {
  if (H == nullptr || kv == nullptr || qk == nullptr || T < 0 || hc < 1 || hc > kMaxStreams ||
      D < 1)
    return cudaErrorInvalidValue;
  if (T > int64_t{0x7FFFFFFF} / hc) return cudaErrorInvalidValue;  // grid.x limit
  // kv is read while H is written by other blocks: overlapping ranges would race.
  const auto h0 = reinterpret_cast<uintptr_t>(H), k0 = reinterpret_cast<uintptr_t>(kv);
  const auto h1 = h0 + static_cast<uintptr_t>(T * hc * D) * sizeof(float);
  const auto k1 = k0 + static_cast<uintptr_t>(T * (hc + 1) * D) * sizeof(float);
  if (T > 0 && h0 < k1 && k0 < h1) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  return detail::launch_kernel(engram_gate_kernel, static_cast<unsigned>(T * hc), kThreads, 0,
                               stream, H, kv, qk, image_flags, hc, D, eps);
}

}  // namespace dsv41::kernels
