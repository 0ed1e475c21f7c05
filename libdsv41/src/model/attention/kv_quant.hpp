// The three KV fake-quantisers of spec model-architecture.md §2.7 ("QAT semantics", part of the
// model): values are rounded onto the FP8/FP4 grid with per-block scales and dequantised again, in
// place. Each is a no-op when n is not a multiple of its block (the oracle's rule for widths it
// cannot block). Scale rules follow the oracle bit for bit (tests/fixtures/golden/tiny40/README.md
// quirk 3): the ue8m0 rules multiply amax by the fp32 reciprocal, the e4m3 rule divides by 6.
#pragma once

#include <cstdint>

namespace dsv41 {

inline constexpr int kWindowQuantBlock = 32;      // FP8 e4m3, ue8m0 scale
inline constexpr int kCompressedQuantBlock = 16;  // FP4 e2m1, e4m3 scale
inline constexpr int kIndexQuantBlock = 32;       // FP4 e2m1, ue8m0 scale

// Window KV: s = 2^ceil(log2(max(amax, 1e-4)·fp32(1/448))); x = e4m3(clamp(x/s, ±448))·s.
void fake_quant_window_fp8(float* x, int64_t n);
// Compressed KV: s = e4m3(max(amax, 6·2^-9)/6); x = e2m1(clamp(x/s, ±6))·s.
void fake_quant_compressed_fp4(float* x, int64_t n);
// Index keys and queries: s = 2^ceil(log2(max(amax, 6·2^-126)·fp32(1/6))); x = e2m1(x/s)·s.
void fake_quant_index_fp4(float* x, int64_t n);

}  // namespace dsv41
