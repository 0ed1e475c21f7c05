// CPU reference math of one EXL3 linear (spec exl3-format.md §1.1, §1.7): the decoded inner
// weight Ŵ, the dense original-basis W, and y = x·W decoded on the fly tile by tile.
// All matrices here are EXL3-oriented: Ŵ and W are [k, n] = [in, out] row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "exl3/exl3_tensor.hpp"

namespace dsv41 {
class ThreadPool;
}

namespace dsv41::exl3 {

// Ŵ as fp16 bits [k, n] row-major (bit-exact with exllamav3 `reconstruct`).
std::vector<uint16_t> decode_inner(const Exl3Tensor& t);

// W = diag(suh)·Hk·Ŵ·Hn·diag(svh) as fp32 [k, n] row-major. The Hadamards run in double on
// exact values (fp16 inputs, <= 2^14 terms), then one product with suh·svh and a rounding to fp32:
// within 1 fp32 ulp of the exact W. For tests and `dsv41 exl3-decode`; never used for inference.
std::vector<float> reconstruct_weight(const Exl3Tensor& t);

// y[rows, n] = x[rows, k] · W (+ bias), decoding each 16x16 tile once per call and never
// materialising Ŵ or W: xh = had(x ⊙ suh); yh = xh·Ŵ; y = had(yh) ⊙ svh. fp32 arithmetic
// (max error ~1e-6 relative to max|y| at k = 5120). `pool` (optional) splits the output columns.
void matmul(const Exl3Tensor& t, const float* x, size_t rows, float* y, ThreadPool* pool = nullptr);

}  // namespace dsv41::exl3
