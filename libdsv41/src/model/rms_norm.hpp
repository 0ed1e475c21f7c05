// RMSNorm as the oracle computes it in fp32 (spec model-architecture.md §2.2,
// §3, §10.9): y = x · (mean(x²) + eps)^-1/2 · w, one statistic per row. eps is
// rms_norm_eps (1e-20 released), so a zero row stays zero instead of dividing
// by eps^1/2.
#pragma once

#include <cstdint>

namespace dsv41 {

// x, y: [rows, n] (may alias); w: [n] or nullptr (no weight, as in the mHC
// input normalisation).
void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y);

// (mean(x²) + eps)^-1/2 of one row, accumulated in double (a fp32 sum over
// 20480 values would add ~1e-6 relative noise that the 1e-5 golden tolerance
// does not need to absorb).
float rms_inverse(const float* x, int64_t n, float eps);

}  // namespace dsv41
