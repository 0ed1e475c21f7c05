// Block-diagonal Hadamard-128 of EXL3 (spec exl3-format.md §2.1): natural-order Sylvester
// H[i][j] = (-1)^popcount(i & j), scaled by 1/sqrt(128), applied to each 128-wide block.
// H is symmetric and orthonormal, so x·H = H·x and H·H = I.
#pragma once

#include <cstddef>

namespace dsv41::exl3 {

constexpr size_t kHadamardSize = 128;

// v[0..len) <- per-128-block H·v (scaled); len must be a multiple of 128.
void hadamard128_blocks(float* v, size_t len);

// Unscaled butterflies on one 128-vector of doubles (the result is sqrt(128)·H·v; exact while
// the values stay within 53 bits, which the fp16 inputs of §1.5 do).
void hadamard128_unscaled(double* v);

}  // namespace dsv41::exl3
