// Rotary position embedding of DeepSeek-V4.1 (spec model-architecture.md §2.2): interleaved
// adjacent pairs (2i, 2i+1) of the trailing rope slice rotated by angle pos·f_i, i < rope_dim/2.
// Two tables: "main" (rope_theta, ratio-0 layers) and "compress" (YaRN on compress_rope_theta,
// attention factor 1, every layer with ratio > 0 and the compressor/indexer).
#pragma once

#include <cstdint>
#include <vector>

namespace dsv41 {

struct RopeScaling;
struct TextConfig;

// f_i = 1 / theta^(2i/dim) in fp32, as HF's default rope init computes it (fp32 exponent, fp32
// pow).
std::vector<float> rope_inv_freq_default(double theta, int rope_dim);
// HF `_compute_yarn_parameters` with truncate = true: low = floor(corr(beta_fast)),
// high = ceil(corr(beta_slow)) clamped to [0, dim-1], ramp r_i = clamp((i-low)/(high-low), 0, 1),
// f_i = (1/(factor·p_i))·r_i + (1/p_i)·(1-r_i) with p_i = theta^(2i/dim) (§2.2: low 15, high 25).
std::vector<float> rope_inv_freq_yarn(double theta, int rope_dim, const RopeScaling& s);

struct RopeTables {
  int rope_dim = 0;
  std::vector<float> main;      // [rope_dim/2]
  std::vector<float> compress;  // [rope_dim/2]; YaRN iff rope_scaling.rope_type == "yarn"
  static RopeTables from_config(const TextConfig& t);
  const std::vector<float>& for_layer(bool compress_rope) const {
    return compress_rope ? compress : main;
  }
};

// Rotates x[0, rope_dim) (the rope slice, adjacent pairs) by angle fp32(pos)·f_i; the angle is
// rounded to fp32 before cos/sin as the oracle does. inverse: rotation by -angle (§2.2 step 6).
void rope_rotate(float* x, const float* inv_freq, int rope_dim, int64_t pos, bool inverse);

}  // namespace dsv41
