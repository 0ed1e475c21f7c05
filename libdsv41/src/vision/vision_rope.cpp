#include "vision/vision_rope.hpp"

#include <cmath>

namespace dsv41::vision {

std::vector<float> vision_rope_angles(int n_h, int n_w, int head_dim, double theta) {
  const int rope_dim = head_dim / 2;  // angles per position
  const int n_freq = rope_dim / 2;    // θ_m per axis
  std::vector<float> inv_freq(static_cast<size_t>(n_freq));
  for (int m = 0; m < n_freq; ++m)
    inv_freq[m] = 1.0f / std::pow(static_cast<float>(theta),
                                  static_cast<float>(2 * m) / static_cast<float>(rope_dim));
  std::vector<float> a(static_cast<size_t>(n_h) * n_w * rope_dim);
  for (int r = 0; r < n_h; ++r)
    for (int c = 0; c < n_w; ++c) {
      float* row = a.data() + (static_cast<int64_t>(r) * n_w + c) * rope_dim;
      for (int m = 0; m < n_freq; ++m) {
        row[m] = static_cast<float>(r) * inv_freq[m];
        row[n_freq + m] = static_cast<float>(c) * inv_freq[m];
      }
    }
  return a;
}

void apply_vision_rope(float* x, const float* angles, int head_dim) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float c = std::cos(angles[i]), s = std::sin(angles[i]);
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

void rotate_qk(float* qkv, int64_t n, int heads, int head_dim, const float* angles) {
  const int64_t hidden = int64_t{heads} * head_dim, half = head_dim / 2;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t part = 0; part < 2; ++part)  // q, k
      for (int64_t h = 0; h < heads; ++h)
        apply_vision_rope(qkv + t * 3 * hidden + part * hidden + h * head_dim, angles + t * half,
                          head_dim);
}

}  // namespace dsv41::vision
