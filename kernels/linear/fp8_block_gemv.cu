// FP8 e4m3 dense weight with 32x32 E8M0 block scales (spec model-architecture.md §1.4): the decode
// GEMV of attention, shared experts and Engram wkv. A 16-byte chunk is 16 columns inside one
// 32-column scale block, and the R <= 4 rows of a warp sit inside one 32-row block, so one scale
// byte serves the whole chunk.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "dsv41k/launchers.hpp"
#include "linear/quant_gemv.cuh"

namespace dsv41::kernels {
namespace {

struct Fp8Block32 {
  static constexpr int kElemsPerChunk = 16;
  static constexpr int kSubChunks = 1;
  static constexpr float kScalePostMul = 1.0f;
  static constexpr bool kScaleSharedByRows = true;

  // Two e4m3 bytes -> f16x2 in one hardware conversion (sm_89+, exact: e4m3 ⊂ f16, NaN kept),
  // then f16 -> f32 (exact).
  __device__ __forceinline__ static float2 e4m3x2_to_float2(uint32_t two_bytes) {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes), __NV_E4M3);
    return __half22float2(__half2(h));
  }
  __device__ __forceinline__ static void decode(const uint4& c, int /*sub*/, float (&v)[16]) {
    const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 lo = e4m3x2_to_float2(words[i] & 0xFFFFu);
      const float2 hi = e4m3x2_to_float2(words[i] >> 16);
      v[4 * i + 0] = lo.x;
      v[4 * i + 1] = lo.y;
      v[4 * i + 2] = hi.x;
      v[4 * i + 3] = hi.y;
    }
  }
  // scale [ceil(out/32), ceil(in/32)]; chunk c covers columns [16c, 16c + 16), so 32 chunks
  // further on is 16 scale columns further on.
  static constexpr int kScaleStep = 16;
  __device__ __forceinline__ static const uint8_t* scale_ptr(const uint8_t* s, int64_t o, int64_t c,
                                                             int64_t in) {
    return s + (o / 32) * ((in + 31) / 32) + c / 2;
  }
};

}  // namespace

cudaError_t fp8_block_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                           int rows, int64_t out, int64_t in, cudaStream_t stream) {
  if (!detail::gemv_args_ok(x, w, scale, y, rows, out, in, Fp8Block32::kElemsPerChunk))
    return cudaErrorInvalidValue;
  return detail::dispatch_quant_gemv<Fp8Block32>(x, w, scale, y, rows, out, in, stream);
}

cudaError_t fp8_block_gemv_grouped(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                                   int rows, int groups, int64_t out, int64_t in,
                                   cudaStream_t stream) {
  if (groups < 1 || (groups > 1 && out % 32 != 0) || in * groups > (int64_t{1} << 28) ||
      out * groups > (int64_t{1} << 40) ||
      !detail::gemv_args_ok(x, w, scale, y, rows, out, in, Fp8Block32::kElemsPerChunk))
    return cudaErrorInvalidValue;
  return detail::dispatch_quant_gemv<Fp8Block32>(x, w, scale, y, rows, out, in, stream, groups);
}

cudaError_t fp8_block_gemv_multi(const float* x, const Fp8GemvJob* jobs, int n_jobs, int rows,
                                 int64_t in, cudaStream_t stream) {
  static_assert(kFp8GemvMaxJobs == detail::kGemvMaxJobs);
  if (jobs == nullptr || n_jobs < 1 || n_jobs > kFp8GemvMaxJobs) return cudaErrorInvalidValue;
  detail::GemvJobs g{};
  g.n = n_jobs;
  for (int j = 0; j < n_jobs; ++j) {
    const Fp8GemvJob& b = jobs[j];
    if (!detail::gemv_args_ok(x, b.w, b.scale, b.y, rows, b.out, in, Fp8Block32::kElemsPerChunk))
      return cudaErrorInvalidValue;
    // Outputs must not overlap each other (x vs y is checked above only at its start).
    const uintptr_t y0 = reinterpret_cast<uintptr_t>(b.y), y1 = y0 + rows * b.out * 4;
    for (int k = 0; k < j; ++k) {
      const uintptr_t z0 = reinterpret_cast<uintptr_t>(jobs[k].y), z1 = z0 + rows * jobs[k].out * 4;
      if (y0 < z1 && z0 < y1) return cudaErrorInvalidValue;
    }
    const uintptr_t x0 = reinterpret_cast<uintptr_t>(x), x1 = x0 + rows * in * 4;
    if (y0 < x1 && x0 < y1) return cudaErrorInvalidValue;
    const Fp8GemvRope& r = b.rope;
    if (r.inv_freq != nullptr &&
        (j > 0 || r.head_dim < 2 || r.rope_dim < 2 || r.rope_dim > r.head_dim ||
         r.rope_dim % 2 != 0 || r.head_dim % 2 != 0 || b.out % r.head_dim != 0 || r.pos0 < 0))
      return cudaErrorInvalidValue;
    g.w[j] = b.w;
    g.scale[j] = b.scale;
    g.y[j] = b.y;
    g.out[j] = b.out;
    if (j == 0) g.rope0 = detail::GemvRope{r.inv_freq, r.head_dim, r.rope_dim, r.pos0};
  }
  return detail::dispatch_quant_gemv_multi<Fp8Block32>(x, g, rows, in, stream);
}

}  // namespace dsv41::kernels
