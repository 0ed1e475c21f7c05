// RoPE on the trailing rope slice of each head (spec model-architecture.md §2.2), the CPU
// reference model/attention/rope.cpp op for op: angle = fp32(pos) · f_i (fp32), c and s =
// fp32(cos / sin of the fp64 angle), then ec - os and es + oc with every product and sum rounded
// separately (__fmul_rn / __fsub_rn / __fadd_rn: no FMA). One thread per (row, head, pair).
// cos/sin in fp64 are within an fp64 ulp of glibc's, so c and s round to the same fp32 except
// within ~2^-29 of an fp32 rounding boundary.
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
  const float fpos = static_cast<float>(pos0 + t * pos_step);
  const double angle = static_cast<double>(__fmul_rn(fpos, inv_freq[pair]));
  const float c = static_cast<float>(cos(angle));
  float s = static_cast<float>(sin(angle));
  if (inverse) s = -s;
  const float even = r[0], odd = r[1];
  r[0] = __fsub_rn(__fmul_rn(even, c), __fmul_rn(odd, s));
  r[1] = __fadd_rn(__fmul_rn(even, s), __fmul_rn(odd, c));
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
