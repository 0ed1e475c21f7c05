// Dense BF16 / F32 weight GEMV (spec model-architecture.md §1.4: the router gate [E, D] and the
// fp32 head [V, D] are stored unquantised): y[rows, out] = x[rows, in] · Wᵀ, fp32 accumulation.
// CPU reference: Linear::forward for kBF16 / kF32 (model/linear.cpp). S warps (1, 2, 4 or 8) per
// output row; lane l of the row's warp p reads the 8-element chunks (32 p + l) + 32 S j of its
// row once (16 B of BF16 or 32 B of F32) and applies them to all `rows` activation rows, so each
// weight byte is read once per call.
#include <cuda_bf16.h>

#include "common/launch.cuh"
#include "dsv41k/launchers.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 8;  // elements per lane step

__device__ __forceinline__ void load_chunk(const uint16_t* w, float (&v)[kChunk]) {
  const uint4 c = *reinterpret_cast<const uint4*>(w);
  const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // bf16 -> f32 is a 16-bit shift (exact)
    v[2 * i] = __uint_as_float(words[i] << 16);
    v[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
  }
}
__device__ __forceinline__ void load_chunk(const float* w, float (&v)[kChunk]) {
  const float4 a = *reinterpret_cast<const float4*>(w);
  const float4 b = *reinterpret_cast<const float4*>(w + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// S warps share one output row (each takes every S-th 256-element lane sweep) and the block's
// R = 8 / S rows: a small `out` then still spreads over enough SMs. One warp per row left the
// 32-row indexer weights_proj on 4 blocks (4 SMs, 11 µs for 327 KB) and the 512-row compressor
// projections on 64 (docs/perf.md "Split dense GEMV"). The S partial sums are added in a fixed
// order (part 0 first), so the result does not depend on scheduling.
template <typename W, int T, int S>
__global__ void __launch_bounds__(kThreads)
    dense_gemv_kernel(const float* __restrict__ x, const W* __restrict__ w, float* __restrict__ y,
                      int rows, int64_t out, int64_t in) {
  constexpr int R = kWarps / S;
  constexpr int64_t kStride = int64_t{32} * S * kChunk;  // elements between one warp's steps
  __shared__ float partial[S > 1 ? kWarps : 1][T];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int part = warp % S;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * R + warp / S;
  const int64_t first = (int64_t{part} * 32 + lane) * kChunk;
  // The warp's first two steps go to L2 before the wait for the kernel that writes x
  // (common/launch.cuh; weights are never written): one lane per 128-byte line.
  if (o < out) {
    for (int64_t c = first; c < min(in, first + 2 * kStride); c += kStride)
      if (c * static_cast<int64_t>(sizeof(W)) % 128 == 0) detail::prefetch_l2(w + o * in + c);
  }
  detail::pdl_begin();
  float acc[T];
#pragma unroll
  for (int t = 0; t < T; ++t) acc[t] = 0.0f;
  if (o < out) {
    const W* wrow = w + o * in;
    for (int64_t c = first; c < in; c += kStride) {
      float v[kChunk];
      load_chunk(wrow + c, v);
#pragma unroll
      for (int t = 0; t < T; ++t) {
        if (t < rows) {
          const float4 a = *reinterpret_cast<const float4*>(x + t * in + c);
          const float4 b = *reinterpret_cast<const float4*>(x + t * in + c + 4);
          acc[t] += a.x * v[0] + a.y * v[1] + a.z * v[2] + a.w * v[3] + b.x * v[4] + b.y * v[5] +
                    b.z * v[6] + b.w * v[7];
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) acc[t] += __shfl_xor_sync(0xFFFFFFFFu, acc[t], m);
  }
  if constexpr (S == 1) {
    if (o < out && lane == 0) {
#pragma unroll
      for (int t = 0; t < T; ++t)
        if (t < rows) y[t * out + o] = acc[t];
    }
  } else {
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < T; ++t) partial[warp][t] = acc[t];
    }
    __syncthreads();
    if (part == 0 && o < out && lane < T && lane < rows) {
      float s = 0.0f;
#pragma unroll
      for (int p = 0; p < S; ++p) s += partial[warp + p][lane];
      y[lane * out + o] = s;
    }
  }
}

// Warps per output row: the fewest that give >= kMinBlocks blocks, but no more than the row has
// 256-element sweeps (an idle warp only adds to the reduction). 264 = two blocks per SM on the
// 132-SM H100 (the H200 has as many); GB10's 48 SMs are filled sooner.
constexpr int64_t kMinBlocks = 264;
int warps_per_row(int64_t out, int64_t in) {
  const int64_t sweeps = (in + 32 * kChunk - 1) / (32 * kChunk);
  int s = 1;
  while (s < kWarps && (out * s + kWarps - 1) / kWarps < kMinBlocks && 2 * s <= sweeps) s *= 2;
  return s;
}

template <typename W, int S>
void launch_split(const float* x, const W* w, float* y, int rows, int64_t out, int64_t in,
                  unsigned g, cudaStream_t stream) {
  if (rows <= 1) {
    (void)detail::launch_kernel(dense_gemv_kernel<W, 1, S>, g, kThreads, 0, stream, x, w, y, rows,
                                out, in);
  } else if (rows <= 4) {
    (void)detail::launch_kernel(dense_gemv_kernel<W, 4, S>, g, kThreads, 0, stream, x, w, y, rows,
                                out, in);
  } else if (rows <= 8) {
    (void)detail::launch_kernel(dense_gemv_kernel<W, 8, S>, g, kThreads, 0, stream, x, w, y, rows,
                                out, in);
  } else {
    (void)detail::launch_kernel(dense_gemv_kernel<W, 16, S>, g, kThreads, 0, stream, x, w, y, rows,
                                out, in);
  }
}

template <typename W>
cudaError_t launch(const float* x, const W* w, float* y, int rows, int64_t out, int64_t in,
                   cudaStream_t stream) {
  const int s = warps_per_row(out, in);
  const int64_t r = kWarps / s;
  const int64_t blocks = (out + r - 1) / r;
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const unsigned g = static_cast<unsigned>(blocks);
  switch (s) {
    case 1:
      launch_split<W, 1>(x, w, y, rows, out, in, g, stream);
      break;
    case 2:
      launch_split<W, 2>(x, w, y, rows, out, in, g, stream);
      break;
    case 4:
      launch_split<W, 4>(x, w, y, rows, out, in, g, stream);
      break;
    default:
      launch_split<W, 8>(x, w, y, rows, out, in, g, stream);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t dense_gemv(const float* x, const void* w, DenseWeight format, float* y, int rows,
                       int64_t out, int64_t in, cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (x == nullptr || w == nullptr || y == nullptr || rows < 1 || rows > kGemvMaxRows || out < 1 ||
      in < kChunk || in % kChunk != 0 || !aligned16(x) || !aligned16(w) ||
      static_cast<const void*>(x) == y)
    return cudaErrorInvalidValue;
  if (format == DenseWeight::kBF16)
    return launch(x, static_cast<const uint16_t*>(w), y, rows, out, in, stream);
  if (format == DenseWeight::kF32)
    return launch(x, static_cast<const float*>(w), y, rows, out, in, stream);
  return cudaErrorInvalidValue;
}

}  // namespace dsv41::kernels
