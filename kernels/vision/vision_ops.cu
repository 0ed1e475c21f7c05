// The vision tower's device ops (include/dsv41k/vision.hpp), each the CPU reference's op sequence
// (libdsv41/src/vision/): element-wise ops with __fadd_rn / __fmul_rn / __fdiv_rn so nvcc cannot
// contract them, and the bidirectional attention as one streaming pass per query.
#include <cmath>

#include "common/launch.cuh"
#include "dsv41k/vision.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>((count + kThreads - 1) / kThreads);
}

// Grids are 1-D over elements: count / 256 must fit grid.x.
bool grid_ok(int64_t count) { return count >= 0 && count / kThreads < int64_t{0x7FFFFFFF}; }

__global__ void __launch_bounds__(kThreads)
    add_bias_kernel(float* __restrict__ y, const float* __restrict__ b, int64_t rows, int64_t n) {
  detail::pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows * n) return;
  y[i] = __fadd_rn(y[i], b[i % n]);
}

__global__ void __launch_bounds__(kThreads)
    residual_add_kernel(float* __restrict__ x, const float* __restrict__ y,
                        const float* __restrict__ b, int64_t rows, int64_t n) {
  detail::pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows * n) return;
  const float v = b != nullptr ? __fadd_rn(y[i], b[i % n]) : y[i];
  x[i] = __fadd_rn(x[i], v);
}

// One thread per (token, q|k, head, i < half).
__global__ void __launch_bounds__(kThreads)
    rope_kernel(float* __restrict__ qkv, const float* __restrict__ cos_t,
                const float* __restrict__ sin_t, int64_t n, int heads, int head_dim) {
  detail::pdl_begin();
  const int half = head_dim / 2;
  const int64_t per_token = int64_t{2} * heads * half;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= n * per_token) return;
  const int64_t t = e / per_token;
  const int64_t r = e % per_token;
  const int64_t part = r / (int64_t{heads} * half), h = (r / half) % heads;
  const int i = static_cast<int>(r % half);
  float* x = qkv + t * 3 * heads * head_dim + part * heads * head_dim + h * head_dim;
  const float c = cos_t[t * half + i], s = sin_t[t * half + i];
  const float x1 = x[i], x2 = x[i + half];
  x[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
  x[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

__global__ void __launch_bounds__(kThreads)
    silu_mul_kernel(const float* __restrict__ gu, float* __restrict__ act, int64_t rows,
                    int64_t inter) {
  detail::pdl_begin();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= rows * inter) return;
  const int64_t t = e / inter, i = e % inter;
  const float g = gu[t * 2 * inter + i], u = gu[t * 2 * inter + inter + i];
  const float silu = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
  act[e] = __fmul_rn(silu, u);
}

__global__ void __launch_bounds__(kThreads) gelu_kernel(float* __restrict__ h, int64_t count) {
  detail::pdl_begin();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= count) return;
  const float x = h[e];
  const float inner = __fadd_rn(1.0f, erff(__fdiv_rn(x, sqrtf(2.0f))));
  h[e] = __fmul_rn(__fmul_rn(0.5f, x), inner);
}

// One thread per output element (cell, c, dy, dx).
__global__ void __launch_bounds__(kThreads)
    merge_kernel(const float* __restrict__ x, float* __restrict__ out, int vit_h, int vit_w,
                 int64_t C, int r, int cols, int64_t total) {
  detail::pdl_begin();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= total) return;
  const int64_t width = C * r * r;
  const int64_t cell = e / width, k = e % width;
  const int64_t c = k / (r * r);
  const int dy = static_cast<int>((k / r) % r), dx = static_cast<int>(k % r);
  const int y = static_cast<int>(cell / cols) * r + dy, xc = static_cast<int>(cell % cols) * r + dx;
  out[e] = (y < vit_h && xc < vit_w) ? x[(int64_t{y} * vit_w + xc) * C + c] : 0.0f;
}

// One thread per query of one head (blockIdx.y): q and the output accumulator in registers, K and
// V tiles of kKeys tokens staged in shared memory (every thread reads the same key element: a
// broadcast). Per tile: the scores, the running max m and sum l rescaled by e^(m_old - m_new),
// then acc = acc · e^(m_old - m_new) + Σ p_j v_j. out = acc / l.
constexpr int kQueries = 128, kKeys = 32;

template <int HD>
__global__ void __launch_bounds__(kQueries)
    attention_kernel(const float* __restrict__ qkv, float* __restrict__ out, int64_t n, int heads,
                     float scale) {
  detail::pdl_begin();
  __shared__ float4 ks[kKeys][HD / 4];
  __shared__ float4 vs[kKeys][HD / 4];
  const int h = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kQueries + threadIdx.x;
  const int64_t stride = int64_t{3} * heads * HD;  // one token's q | k | v
  const bool valid = i < n;
  float q[HD], acc[HD];
#pragma unroll
  for (int d = 0; d < HD; ++d) {
    q[d] = valid ? qkv[i * stride + h * HD + d] : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const float* kbase = qkv + int64_t{heads} * HD + h * HD;
  const float* vbase = qkv + int64_t{2} * heads * HD + h * HD;
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    const int nk = static_cast<int>(min(int64_t{kKeys}, n - j0));
    for (int e = threadIdx.x; e < kKeys * (HD / 4); e += kQueries) {
      const int jj = e / (HD / 4), f = e % (HD / 4);
      const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      ks[jj][f] = jj < nk ? reinterpret_cast<const float4*>(kbase + (j0 + jj) * stride)[f] : zero;
      vs[jj][f] = jj < nk ? reinterpret_cast<const float4*>(vbase + (j0 + jj) * stride)[f] : zero;
    }
    __syncthreads();
    if (valid) {
      float s[kKeys];
      float mt = m;
#pragma unroll
      for (int jj = 0; jj < kKeys; ++jj) {
        float dot = 0.0f;
#pragma unroll
        for (int f = 0; f < HD / 4; ++f) {
          const float4 k = ks[jj][f];
          dot = fmaf(q[4 * f + 0], k.x, dot);
          dot = fmaf(q[4 * f + 1], k.y, dot);
          dot = fmaf(q[4 * f + 2], k.z, dot);
          dot = fmaf(q[4 * f + 3], k.w, dot);
        }
        s[jj] = jj < nk ? dot * scale : -INFINITY;
        mt = fmaxf(mt, s[jj]);
      }
      const float corr = expf(m - mt);  // 0 on the first tile (m = -inf)
      l *= corr;
#pragma unroll
      for (int d = 0; d < HD; ++d) acc[d] *= corr;
#pragma unroll
      for (int jj = 0; jj < kKeys; ++jj) {
        const float p = expf(s[jj] - mt);  // 0 past nk
        l += p;
#pragma unroll
        for (int f = 0; f < HD / 4; ++f) {
          const float4 v = vs[jj][f];
          acc[4 * f + 0] = fmaf(p, v.x, acc[4 * f + 0]);
          acc[4 * f + 1] = fmaf(p, v.y, acc[4 * f + 1]);
          acc[4 * f + 2] = fmaf(p, v.z, acc[4 * f + 2]);
          acc[4 * f + 3] = fmaf(p, v.w, acc[4 * f + 3]);
        }
      }
      m = mt;
    }
    __syncthreads();
  }
  if (!valid) return;
  float* o = out + (i * heads + h) * HD;
#pragma unroll
  for (int d = 0; d < HD; ++d) o[d] = acc[d] / l;
}

}  // namespace

cudaError_t vision_add_bias(float* y, const float* b, int64_t rows, int64_t n,
                            cudaStream_t stream) {
  if (y == nullptr || b == nullptr || rows < 0 || n < 1 || rows > INT64_MAX / n ||
      !grid_ok(rows * n))
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return detail::launch_kernel(add_bias_kernel, blocks_for(rows * n), kThreads, 0, stream, y, b,
                               rows, n);
}

cudaError_t vision_residual_add(float* x, const float* y, const float* b, int64_t rows, int64_t n,
                                cudaStream_t stream) {
  if (x == nullptr || y == nullptr || rows < 0 || n < 1 || rows > INT64_MAX / n ||
      !grid_ok(rows * n))
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return detail::launch_kernel(residual_add_kernel, blocks_for(rows * n), kThreads, 0, stream, x, y,
                               b, rows, n);
}

cudaError_t vision_rope(float* qkv, const float* cos_t, const float* sin_t, int64_t n, int heads,
                        int head_dim, cudaStream_t stream) {
  if (qkv == nullptr || cos_t == nullptr || sin_t == nullptr || n < 0 || heads < 1 ||
      head_dim < 2 || head_dim % 2 != 0)
    return cudaErrorInvalidValue;
  const int64_t per_token = int64_t{heads} * head_dim;  // 2 parts x heads x half
  if (n > INT64_MAX / per_token || !grid_ok(n * per_token)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return detail::launch_kernel(rope_kernel, blocks_for(n * per_token), kThreads, 0, stream, qkv,
                               cos_t, sin_t, n, heads, head_dim);
}

cudaError_t vision_silu_mul(const float* gu, float* act, int64_t rows, int64_t inter,
                            cudaStream_t stream) {
  if (gu == nullptr || act == nullptr || rows < 0 || inter < 1 || rows > INT64_MAX / inter ||
      !grid_ok(rows * inter))
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return detail::launch_kernel(silu_mul_kernel, blocks_for(rows * inter), kThreads, 0, stream, gu,
                               act, rows, inter);
}

cudaError_t vision_gelu(float* h, int64_t count, cudaStream_t stream) {
  if (h == nullptr || !grid_ok(count)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  return detail::launch_kernel(gelu_kernel, blocks_for(count), kThreads, 0, stream, h, count);
}

cudaError_t vision_merge(const float* x, float* out, int vit_h, int vit_w, int64_t C, int r,
                         cudaStream_t stream) {
  if (x == nullptr || out == nullptr || vit_h < 1 || vit_w < 1 || C < 1 || r < 1)
    return cudaErrorInvalidValue;
  const int rows = (vit_h + r - 1) / r, cols = (vit_w + r - 1) / r;
  const int64_t width = C * r * r, cells = int64_t{rows} * cols;
  if (width / (int64_t{r} * r) != C || cells > INT64_MAX / width || !grid_ok(cells * width))
    return cudaErrorInvalidValue;
  return detail::launch_kernel(merge_kernel, blocks_for(cells * width), kThreads, 0, stream, x, out,
                               vit_h, vit_w, C, r, cols, cells * width);
}

cudaError_t vision_attention(const float* qkv, float* out, int64_t n, int heads, int head_dim,
                             cudaStream_t stream) {
  if (qkv == nullptr || out == nullptr || n < 0 || heads < 1 || heads > 65535 ||
      (head_dim != 16 && head_dim != 32 && head_dim != 64) ||
      (n + kQueries - 1) / kQueries > int64_t{0x7FFFFFFF} ||
      (reinterpret_cast<uintptr_t>(qkv) & 15) != 0)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((n + kQueries - 1) / kQueries),
                  static_cast<unsigned>(heads));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  switch (head_dim) {
    case 16:
      return detail::launch_kernel(attention_kernel<16>, grid, kQueries, 0, stream, qkv, out, n,
                                   heads, scale);
    case 32:
      return detail::launch_kernel(attention_kernel<32>, grid, kQueries, 0, stream, qkv, out, n,
                                   heads, scale);
    default:
      return detail::launch_kernel(attention_kernel<64>, grid, kQueries, 0, stream, qkv, out, n,
                                   heads, scale);
  }
}

}  // namespace dsv41::kernels
