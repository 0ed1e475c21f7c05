// Dense launchers of the tensor-core GEMM over quantised and BF16 weights (linear/quant_gemm.cuh):
// a grid of (128-row weight tiles, 64-row activation tiles).
#include <type_traits>

#include "dsv41k/launchers.hpp"
#include "linear/quant_gemm.cuh"

namespace dsv41::kernels {
namespace {

template <class Fmt>
__global__ void __launch_bounds__(detail::kGemmThreads, 2)
    quant_gemm_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                      const uint8_t* __restrict__ scale, float* __restrict__ y, int64_t rows,
                      int64_t out, int64_t in) {
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * detail::kGemmBM;
  const int64_t left = rows - m0;
  const int r = static_cast<int>(left < detail::kGemmBM ? left : detail::kGemmBM);
  detail::quant_gemm_block<Fmt>(x + m0 * in, w, scale, y + m0 * out, r, out, in,
                                static_cast<int64_t>(blockIdx.x) * detail::kGemmBN);
}

bool gemm_args_ok(const float* x, const uint8_t* w, const uint8_t* scale, const float* y,
                  int64_t rows, int64_t out, int64_t in) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return x && w && y && rows >= 0 && out >= 1 && in >= 32 && in % 32 == 0 &&
         in <= (int64_t{1} << 28) && aligned16(x) && aligned16(w) &&
         static_cast<const void*>(x) != y &&
         (out + detail::kGemmBN - 1) / detail::kGemmBN <= 0x7FFFFFFF &&
         (rows + detail::kGemmBM - 1) / detail::kGemmBM <= 65535;
}

template <class Fmt>
cudaError_t launch(const float* x, const uint8_t* w, const uint8_t* scale, float* y, int64_t rows,
                   int64_t out, int64_t in, cudaStream_t stream) {
  if (!gemm_args_ok(x, w, scale, y, rows, out, in)) return cudaErrorInvalidValue;
  if (scale == nullptr && !std::is_same_v<Fmt, detail::GemmBf16Row>) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((out + detail::kGemmBN - 1) / detail::kGemmBN),
                  static_cast<unsigned>((rows + detail::kGemmBM - 1) / detail::kGemmBM));
  quant_gemm_kernel<Fmt><<<grid, detail::kGemmThreads, 0, stream>>>(x, w, scale, y, rows, out, in);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fp8_block_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                           int64_t rows, int64_t out, int64_t in, cudaStream_t stream) {
  return launch<detail::GemmFp8Block>(x, w, scale, y, rows, out, in, stream);
}

cudaError_t fp4_expert_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                            int64_t rows, int64_t out, int64_t in, cudaStream_t stream) {
  return launch<detail::GemmFp4Row>(x, w, scale, y, rows, out, in, stream);
}

cudaError_t bf16_gemm(const float* x, const void* w, float* y, int64_t rows, int64_t out,
                      int64_t in, cudaStream_t stream) {
  return launch<detail::GemmBf16Row>(x, static_cast<const uint8_t*>(w), nullptr, y, rows, out, in,
                                     stream);
}

}  // namespace dsv41::kernels
