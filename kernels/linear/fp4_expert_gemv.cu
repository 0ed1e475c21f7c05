// Packed FP4 (E2M1) routed-expert weight with one E8M0 scale per row per 32 columns (spec
// model-architecture.md §1.4): the decode GEMV of the routed experts. A 16-byte chunk is exactly
// the 32 columns of one scale, decoded as two sub-chunks of 16 values.
#include "dsv41k/launchers.hpp"
#include "linear/fp4_row32.cuh"
#include "linear/quant_gemv.cuh"

namespace dsv41::kernels {

using detail::Fp4Row32;

cudaError_t fp4_expert_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                            int rows, int64_t out, int64_t in, cudaStream_t stream) {
  if (!detail::gemv_args_ok(x, w, scale, y, rows, out, in, Fp4Row32::kElemsPerChunk))
    return cudaErrorInvalidValue;
  return detail::dispatch_quant_gemv<Fp4Row32>(x, w, scale, y, rows, out, in, stream);
}

}  // namespace dsv41::kernels
