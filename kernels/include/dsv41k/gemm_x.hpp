// How activations enter the tensor-core GEMMs (fp8_block_gemm, fp4_expert_gemm, bf16_gemm in
// launchers.hpp, moe_grouped_fp4_gemm in moe.hpp; docs/kernels.md "Quantised GEMM").
#pragma once

namespace dsv41::kernels {

// x as 1, 2 or 3 bf16 parts, each multiplied by the exactly decoded bf16 weights with fp32
// accumulation (one MMA per part). kFp32 (hi, mid, lo: the 24 significant bits of fp32) meets the
// GEMV bound against the fp32 reference; kBf16x2 keeps 16 bits; kBf16 rounds x to bf16 once, like
// the bf16-activation GEMMs of other engines, for a third of the MMAs.
enum class GemmX : int { kBf16 = 1, kBf16x2 = 2, kFp32 = 3 };

}  // namespace dsv41::kernels
