// Index scores (spec model-architecture.md §2.4), the CUDA twin of dsv41::indexer_score_rows
// (model/attention/indexer.cpp), bit-identical: per (query t, entry j) the sequential fp32 sum
// over heads of (max(<q_h, k_j>, 0)·D^-0.5)·(w_h·H^-0.5), each dot sequential over the channels,
// all products and sums unfused. One thread per entry holds its unpacked key (FP4 e2m1 codes ×
// ue8m0 block-32 scales, exact) in registers (D a template parameter); the query row and its head
// weights sit in shared memory (read as broadcasts). Grid: (ceil(n/128), T).
#include <cmath>
#include <cstdint>

#include "common/launch.cuh"
#include "dsv41k/csa.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxSharedFloats = 12288;  // q [H, D] + w [H] within the default 48 KB

// e2m1 code -> value: 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 = sign.
__device__ __forceinline__ float e2m1(int code) {
  const int c = code & 7;
  const float v = c < 2 ? 0.5f * static_cast<float>(c)
                        : ldexpf(1.0f + 0.5f * static_cast<float>(c & 1), (c >> 1) - 1);
  return (code & 8) ? -v : v;
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    scores_kernel(const float* q, const float* w, const uint8_t* keys, const uint8_t* mask,
                  float* scores, int H, int64_t n, int64_t pos0, int ratio, float heads_scale,
                  float softmax_scale) {
  detail::pdl_begin();
  extern __shared__ float smem[];
  float* qs = smem;        // [H, D]
  float* ws = qs + H * D;  // [H]
  const int64_t t = blockIdx.y;
  for (int i = threadIdx.x; i < H * D; i += kThreads) qs[i] = q[t * H * D + i];
  for (int h = threadIdx.x; h < H; h += kThreads) ws[h] = __fmul_rn(w[t * H + h], heads_scale);
  __syncthreads();
  const int64_t j = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (j >= n) return;
  const int64_t visible = (pos0 + t + 1) / ratio;
  float* out = scores + t * n + j;
  if (j >= visible || (mask != nullptr && mask[t * n + j] == 0)) {
    *out = -INFINITY;
    return;
  }
  constexpr int kBytes = D / 2 + D / 32;  // kIndexFp4 entry: nibbles, then ue8m0 scales
  const uint8_t* e = keys + j * kBytes;
  float k[D];
#pragma unroll
  for (int c = 0; c < D; c += 2) {
    const uint8_t b = e[c / 2];
    const float s = ldexpf(1.0f, static_cast<int>(e[D / 2 + c / 32]) - 127);
    k[c] = __fmul_rn(e2m1(b & 0xF), s);
    k[c + 1] = __fmul_rn(e2m1(b >> 4), s);
  }
  float acc = 0.0f;
  for (int h = 0; h < H; ++h) {
    const float* qh = qs + h * D;
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < D; ++c) dot = __fadd_rn(dot, __fmul_rn(qh[c], k[c]));
    acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(fmaxf(dot, 0.0f), softmax_scale), ws[h]));
  }
  *out = acc;
}

template <int D>
cudaError_t launch(const float* q, const float* w, const uint8_t* keys, const uint8_t* mask,
                   float* scores, int64_t T, int H, int64_t n, int64_t pos0, int ratio,
                   cudaStream_t stream) {
  const float heads_scale = static_cast<float>(std::pow(static_cast<double>(H), -0.5));
  const float softmax_scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  const dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(T));
  const size_t smem = (static_cast<size_t>(H) * D + H) * sizeof(float);
  return detail::launch_kernel(scores_kernel<D>, grid, kThreads, smem, stream, q, w, keys, mask,
                               scores, H, n, pos0, ratio, heads_scale, softmax_scale);
}

}  // namespace

cudaError_t indexer_scores(const float* q, const float* w, const uint8_t* keys, const uint8_t* mask,
                           float* scores, int64_t T, int heads, int D, int64_t n, int64_t pos0,
                           int ratio, cudaStream_t stream) {
  if (T < 0 || T > 65535 || n < 0 || heads < 1 || pos0 < 0 || ratio < 1 || q == nullptr ||
      w == nullptr || scores == nullptr || (n > 0 && keys == nullptr) ||
      int64_t{heads} * D + heads > kMaxSharedFloats || n > (int64_t{1} << 31))
    return cudaErrorInvalidValue;
  if (D != 32 && D != 64 && D != 128 && D != 256) return cudaErrorInvalidValue;
  if (T == 0 || n == 0) return cudaSuccess;
  switch (D) {
    case 32:
      return launch<32>(q, w, keys, mask, scores, T, heads, n, pos0, ratio, stream);
    case 64:
      return launch<64>(q, w, keys, mask, scores, T, heads, n, pos0, ratio, stream);
    case 128:
      return launch<128>(q, w, keys, mask, scores, T, heads, n, pos0, ratio, stream);
    default:
      return launch<256>(q, w, keys, mask, scores, T, heads, n, pos0, ratio, stream);
  }
}

}  // namespace dsv41::kernels
