// §2.7 fake-quantisers, mirroring HF `_fake_quant_fp8_block` / `_fake_quant_fp4_block` in fp32.
#include "model/attention/kv_quant.hpp"

#include <algorithm>
#include <cmath>

#include "quant/dtype.hpp"

namespace dsv41 {
namespace {

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;

float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// Values onto the e2m1 grid with scale s: e2m1(clamp(x/s, ±6))·s.
void fp4_block(float* x, int n, float s) {
  for (int i = 0; i < n; ++i) {
    const float q = std::clamp(x[i] / s, -kFp4Max, kFp4Max);
    x[i] = e2m1_to_f32(f32_to_e2m1(q)) * s;
  }
}

}  // namespace

void fake_quant_window_fp8(float* x, int64_t n) {
  if (n % kWindowQuantBlock != 0) return;
  const float inv_max = static_cast<float>(1.0 / 448.0);  // oracle: amax * (1.0 / 448), fp32
  for (int64_t b = 0; b < n; b += kWindowQuantBlock) {
    float* xb = x + b;
    const float amax = std::max(block_amax(xb, kWindowQuantBlock), 1e-4f);
    const float s = pow2_ceil(amax * inv_max);
    for (int i = 0; i < kWindowQuantBlock; ++i) {
      const float q = std::clamp(xb[i] / s, -kFp8Max, kFp8Max);
      xb[i] = round_e4m3(q) * s;
    }
  }
}

void fake_quant_compressed_fp4(float* x, int64_t n) {
  if (n % kCompressedQuantBlock != 0) return;
  const float floor_amax = 6.0f * std::ldexp(1.0f, -9);
  for (int64_t b = 0; b < n; b += kCompressedQuantBlock) {
    float* xb = x + b;
    const float amax = std::max(block_amax(xb, kCompressedQuantBlock), floor_amax);
    const float s = round_e4m3(amax / kFp4Max);  // divides (the ue8m0 rules multiply)
    fp4_block(xb, kCompressedQuantBlock, s);
  }
}

void fake_quant_index_fp4(float* x, int64_t n) {
  if (n % kIndexQuantBlock != 0) return;
  const float floor_amax = 6.0f * std::ldexp(1.0f, -126);
  const float inv_max = static_cast<float>(1.0 / 6.0);
  for (int64_t b = 0; b < n; b += kIndexQuantBlock) {
    float* xb = x + b;
    const float amax = std::max(block_amax(xb, kIndexQuantBlock), floor_amax);
    fp4_block(xb, kIndexQuantBlock, pow2_ceil(amax * inv_max));
  }
}

}  // namespace dsv41
