// [unit] CudaForwardOptions::validate (host code, no GPU): each option out of range is refused,
// naming the field, its value and its range (CudaTransformer::upload calls it first).
#include <catch2/catch.hpp>
#include <functional>
#include <utility>
#include <vector>

#include "backend/cuda/forward/cuda_forward_options.hpp"

namespace dsv41::test {

TEST_CASE("CudaForwardOptions::validate names the option out of range", "[unit][cuda]") {
  cuda::CudaForwardOptions{}.validate();  // the defaults pass
  const std::vector<std::pair<std::function<void(cuda::CudaForwardOptions&)>, const char*>> bad{
      {[](auto& o) { o.max_chunk = 0; }, "CudaForwardOptions.max_chunk = 0 is outside [1, 4096]"},
      {[](auto& o) { o.max_context = 0; }, "CudaForwardOptions.max_context = 0 must be >= 1"},
      {[](auto& o) { o.prefill_x = static_cast<kernels::GemmX>(4); },
       "CudaForwardOptions.prefill_x = 4 is not a GemmX"},
      {[](auto& o) { o.fp4_tc_min_rows = 0; },
       "CudaForwardOptions.fp4_tc_min_rows = 0 is outside [1, 17]"},
      {[](auto& o) { o.fp4_tc_decode_max_rows = 9; },
       "CudaForwardOptions.fp4_tc_decode_max_rows = 9 is outside [0, 8]"},
      {[](auto& o) { o.fp4_tc_decode_min_rows = 0; },
       "CudaForwardOptions.fp4_tc_decode_min_rows = 0 is outside [1, 8]"},
      {[](auto& o) { o.head_gemm_min_rows = 1; },
       "CudaForwardOptions.head_gemm_min_rows = 1 is outside [2, 17]"},
      {[](auto& o) { o.gemm_min_rows = 16; },
       "CudaForwardOptions.gemm_min_rows = 16 is outside [17, 4097]"},
      {[](auto& o) { o.moe_gemm_min_rows = 4098; },
       "CudaForwardOptions.moe_gemm_min_rows = 4098 is outside [17, 4097]"},
      {[](auto& o) { o.moe_gemv_tile_rows = 0; },
       "CudaForwardOptions.moe_gemv_tile_rows = 0 is outside [1, 16]"},
      {[](auto& o) { o.moe_gemv_tile_rows = 17; },
       "CudaForwardOptions.moe_gemv_tile_rows = 17 is outside [1, 16]"},
      {[](auto& o) { o.moe_verify_tile_rows = 0; },
       "CudaForwardOptions.moe_verify_tile_rows = 0 is outside [1, 16]"},
      {[](auto& o) { o.moe_verify_tile_rows = 17; },
       "CudaForwardOptions.moe_verify_tile_rows = 17 is outside [1, 16]"},
      {[](auto& o) { o.moe_exl3_gemm_min_rows = 16; },
       "CudaForwardOptions.moe_exl3_gemm_min_rows = 16 is outside [17, 4097]"},
  };
  for (const auto& [set, message] : bad) {
    cuda::CudaForwardOptions o;
    set(o);
    REQUIRE_THROWS_WITH(o.validate(), Catch::Contains(message));
  }
}

}  // namespace dsv41::test
