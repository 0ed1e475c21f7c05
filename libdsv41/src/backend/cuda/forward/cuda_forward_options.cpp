#include "backend/cuda/forward/cuda_forward_options.hpp"

#include "core/check.hpp"

namespace dsv41::cuda {

void CudaForwardOptions::validate() const {
  DSV41_CHECK(max_chunk >= 1 && max_chunk <= 4096, kInvalidArgument,
              "CudaForwardOptions.max_chunk = {} is outside [1, 4096]", max_chunk);
  DSV41_CHECK(max_context >= 1, kInvalidArgument,
              "CudaForwardOptions.max_context = {} must be >= 1", max_context);
  const int parts = static_cast<int>(prefill_x);
  DSV41_CHECK(parts >= 1 && parts <= 3, kInvalidArgument,
              "CudaForwardOptions.prefill_x = {} is not a GemmX (1, 2 or 3 bf16 parts)", parts);
  DSV41_CHECK(fp4_tc_min_rows >= 1 && fp4_tc_min_rows <= 17, kInvalidArgument,
              "CudaForwardOptions.fp4_tc_min_rows = {} is outside [1, 17]", fp4_tc_min_rows);
  DSV41_CHECK(fp4_tc_decode_max_rows >= 0 && fp4_tc_decode_max_rows <= 8, kInvalidArgument,
              "CudaForwardOptions.fp4_tc_decode_max_rows = {} is outside [0, 8]",
              fp4_tc_decode_max_rows);
  DSV41_CHECK(fp4_tc_decode_min_rows >= 1 && fp4_tc_decode_min_rows <= 8, kInvalidArgument,
              "CudaForwardOptions.fp4_tc_decode_min_rows = {} is outside [1, 8]",
              fp4_tc_decode_min_rows);
  DSV41_CHECK(head_gemm_min_rows >= 2 && head_gemm_min_rows <= 17, kInvalidArgument,
              "CudaForwardOptions.head_gemm_min_rows = {} is outside [2, 17]", head_gemm_min_rows);
  DSV41_CHECK(gemm_min_rows >= 17 && gemm_min_rows <= 4097, kInvalidArgument,
              "CudaForwardOptions.gemm_min_rows = {} is outside [17, 4097]", gemm_min_rows);
  DSV41_CHECK(moe_gemm_min_rows >= 17 && moe_gemm_min_rows <= 4097, kInvalidArgument,
              "CudaForwardOptions.moe_gemm_min_rows = {} is outside [17, 4097]", moe_gemm_min_rows);
  DSV41_CHECK(moe_gemv_tile_rows >= 1 && moe_gemv_tile_rows <= 16, kInvalidArgument,
              "CudaForwardOptions.moe_gemv_tile_rows = {} is outside [1, 16]", moe_gemv_tile_rows);
  DSV41_CHECK(moe_exl3_gemm_min_rows >= 17 && moe_exl3_gemm_min_rows <= 4097, kInvalidArgument,
              "CudaForwardOptions.moe_exl3_gemm_min_rows = {} is outside [17, 4097]",
              moe_exl3_gemm_min_rows);
}

}  // namespace dsv41::cuda
