// RoPE tables and rotation, fp32 exactly in the order the oracle evaluates them (HF
// `_compute_default_rope_parameters` / `_compute_yarn_parameters`, `apply_rotary_pos_emb`).
#include "model/attention/rope.hpp"

#include <algorithm>
#include <cmath>

#include "config/model_config.hpp"
#include "core/check.hpp"

namespace dsv41 {
namespace {

// p_i = theta^(fp32(2i)/dim) in fp32 (the exponent is an fp32 tensor in the oracle).
std::vector<float> pos_freqs(double theta, int rope_dim) {
  DSV41_CHECK(rope_dim > 0 && rope_dim % 2 == 0, kInvalidArgument,
              "RoPE dimension {} must be positive and even", rope_dim);
  std::vector<float> p(rope_dim / 2);
  const float base = static_cast<float>(theta);
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    p[i] = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
  }
  return p;
}

// HF find_correction_dim: dim·ln(max_pos / (rotations·2π)) / (2·ln base), in double.
double correction_dim(double rotations, int dim, double base, double max_pos) {
  return (dim * std::log(max_pos / (rotations * 2 * M_PI))) / (2 * std::log(base));
}

}  // namespace

std::vector<float> rope_inv_freq_default(double theta, int rope_dim) {
  std::vector<float> f = pos_freqs(theta, rope_dim);
  for (float& v : f) v = 1.0f / v;
  return f;
}

std::vector<float> rope_inv_freq_yarn(double theta, int rope_dim, const RopeScaling& s) {
  DSV41_CHECK(s.factor > 0 && s.original_max_position_embeddings > 0, kInvalidArgument,
              "rope_scaling: yarn needs factor > 0 and original_max_position_embeddings > 0 "
              "(got {} and {})",
              s.factor, s.original_max_position_embeddings);
  const std::vector<float> p = pos_freqs(theta, rope_dim);
  const double beta_fast = s.beta_fast != 0 ? s.beta_fast : 32.0;  // HF: `or 32`
  const double beta_slow = s.beta_slow != 0 ? s.beta_slow : 1.0;
  const double max_pos = static_cast<double>(s.original_max_position_embeddings);
  // truncate = true (HF default): floor / ceil, then clamp to [0, dim-1].
  double low = std::floor(correction_dim(beta_fast, rope_dim, theta, max_pos));
  double high = std::ceil(correction_dim(beta_slow, rope_dim, theta, max_pos));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rope_dim - 1));
  if (low == high) high += 0.001;  // HF: prevent a zero-width ramp
  const float flow = static_cast<float>(low), fspan = static_cast<float>(high - low);
  const float factor = static_cast<float>(s.factor);
  std::vector<float> f(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const float ramp = std::clamp((static_cast<float>(i) - flow) / fspan, 0.0f, 1.0f);
    const float extrap_w = 1.0f - ramp;
    const float extrap = 1.0f / p[i];
    const float interp = 1.0f / (factor * p[i]);
    const float a = interp * (1.0f - extrap_w);
    const float b = extrap * extrap_w;
    f[i] = a + b;
  }
  return f;
}

RopeTables RopeTables::from_config(const TextConfig& t) {
  RopeTables r;
  r.rope_dim = t.qk_rope_head_dim;
  DSV41_CHECK(t.qk_rope_head_dim > 0 && t.qk_rope_head_dim <= t.head_dim, kInvalidArgument,
              "config.json: text_config.qk_rope_head_dim = {} must be in (0, head_dim = {}]",
              t.qk_rope_head_dim, t.head_dim);
  r.main = rope_inv_freq_default(t.rope_theta, r.rope_dim);
  if (t.rope_scaling.rope_type == "yarn") {
    r.compress = rope_inv_freq_yarn(t.compress_rope_theta, r.rope_dim, t.rope_scaling);
  } else {
    r.compress = rope_inv_freq_default(t.compress_rope_theta, r.rope_dim);
  }
  return r;
}

void rope_rotate(float* x, const float* inv_freq, int rope_dim, int64_t pos, bool inverse) {
  const float fpos = static_cast<float>(pos);
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float angle = fpos * inv_freq[i];
    const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
    float s = static_cast<float>(std::sin(static_cast<double>(angle)));
    if (inverse) s = -s;
    const float even = x[2 * i], odd = x[2 * i + 1];
    // Two rounded products and one rounded sum each (no FMA), as the oracle's tensor ops.
    const float ec = even * c, os = odd * s, es = even * s, oc = odd * c;
    x[2 * i] = ec - os;
    x[2 * i + 1] = es + oc;
  }
}

}  // namespace dsv41
