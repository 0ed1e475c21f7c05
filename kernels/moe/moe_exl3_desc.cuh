// The operands of one EXL3 MoE descriptor (shared by moe_grouped_exl3_gemv and _gemm): a
// MoeGemvDesc whose w points at a device Exl3MoeMatrix record, its x / y rows in the grouped
// activations (x_cols / y_cols apart).
#pragma once

#include "dsv41k/moe.hpp"
#include "exl3/exl3_gemv_block.cuh"

namespace dsv41::kernels::exl3g {

// False (the block has nothing to do; uniform over the block) for a null w, rows <= 0 or a
// record K outside 2..max_k (the caller's contract: upload checks K); else io and K filled, rows
// capped at max_rows.
__device__ __forceinline__ bool descriptor_io(const MoeGemvDesc& d, int max_rows, int max_k,
                                              const float* x, int64_t x_cols, float* y,
                                              int64_t y_cols, MatrixIo* io, int* K) {
  const int rows = min(d.rows, max_rows);
  if (rows <= 0 || d.w == nullptr) return false;
  const Exl3MoeMatrix mat = *reinterpret_cast<const Exl3MoeMatrix*>(d.w);
  if (mat.K < 2 || mat.K > max_k) return false;
  *io = {mat.trellis,          mat.suh, mat.svh, x + d.x_row * x_cols, x_cols,
         y + d.y_row * y_cols, y_cols,  rows};
  *K = mat.K;
  return true;
}

}  // namespace dsv41::kernels::exl3g
