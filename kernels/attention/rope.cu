// RoPE on the trailing rope slice of each head (spec model-architecture.md §2.2), the CPU
// reference model/attention/rope.cpp op for op (rope.cuh). One thread per (row, head, pair).
#include "attention/rope.cuh"
#include "common/launch.cuh"
#include "dsv41k/attention.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    rope_kernel(float* x, const float* __restrict__ inv_freq, int64_t T, int heads, int head_dim,
                int rope_dim, int64_t pos0, int64_t pos_step, bool inverse) {
  detail::pdl_begin();
  const int half = rope_dim / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * heads * half) return;
  const int pair = static_cast<int>(i % half);
  const int64_t th = i / half, t = th / heads;
  float* r = x + th * head_dim + (head_dim - rope_dim) + 2 * pair;
  float even = r[0], odd = r[1];
  detail::rope_pair(even, odd, inv_freq[pair], pos0 + t * pos_step, inverse);
  r[0] = even;
  r[1] = odd;
}

}  // namespace

cudaError_t rope_rotate(float* x, const float* inv_freq, int64_t T, int heads, int head_dim,
                        int rope_dim, int64_t pos0, int64_t pos_step, bool inverse,
                        cudaStream_t stream) {
  if (x == nullptr || inv_freq == nullptr || T < 0 || heads < 1 || rope_dim < 2 ||
      rope_dim % 2 != 0 || rope_dim > head_dim || pos0 < 0 || pos_step < 0)
    return cudaErrorInvalidValue;
  const int64_t per_row = int64_t{heads} * (rope_dim / 2);
  if (T > (int64_t{0x7FFFFFFF} * kThreads) / per_row) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const int64_t n = T * per_row;
  return detail::launch_kernel(rope_kernel, static_cast<unsigned>((n + kThreads - 1) / kThreads),
                               kThreads, 0, stream, x, inv_freq, T, heads, head_dim, rope_dim, pos0,
                               pos_step, inverse);
}

}  // namespace dsv41::kernels
