#include "backend/cuda/forward/cuda_forward_options.hpp"

#include <cstdint>

#include "core/check.hpp"

namespace dsv41::cuda {
namespace {

// kInvalidArgument naming CudaForwardOptions.<name> when v is outside [lo, hi].
void check_range(const char* name, int64_t v, int64_t lo, int64_t hi) {
  DSV41_CHECK(v >= lo && v <= hi, kInvalidArgument,
              "CudaForwardOptions.{} = {} is outside [{}, {}]", name, v, lo, hi);
}

}  // namespace

void CudaForwardOptions::validate() const {
  check_range("max_chunk", max_chunk, 1, 4096);
  DSV41_CHECK(max_context >= 1, kInvalidArgument,
              "CudaForwardOptions.max_context = {} must be >= 1", max_context);
  const int parts = static_cast<int>(prefill_x);
  DSV41_CHECK(parts >= 1 && parts <= 3, kInvalidArgument,
              "CudaForwardOptions.prefill_x = {} is not a GemmX (1, 2 or 3 bf16 parts)", parts);
  check_range("fp4_tc_min_rows", fp4_tc_min_rows, 1, 17);
  check_range("fp4_tc_decode_max_rows", fp4_tc_decode_max_rows, 0, 8);
  check_range("fp4_tc_decode_min_rows", fp4_tc_decode_min_rows, 1, 8);
  check_range("head_gemm_min_rows", head_gemm_min_rows, 2, 17);
  check_range("gemm_min_rows", gemm_min_rows, 17, 4097);
  check_range("moe_gemm_min_rows", moe_gemm_min_rows, 17, 4097);
  check_range("moe_gemv_tile_rows", moe_gemv_tile_rows, 1, 16);
  check_range("moe_verify_tile_rows", moe_verify_tile_rows, 1, 16);
  check_range("moe_exl3_gemm_min_rows", moe_exl3_gemm_min_rows, 17, 4097);
}

}  // namespace dsv41::cuda
