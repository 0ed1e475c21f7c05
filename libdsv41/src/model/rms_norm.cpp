#include "model/rms_norm.hpp"

#include <cmath>

namespace dsv41 {

float rms_inverse(const float* x, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(ss / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float inv = rms_inverse(xr, n, eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = w ? (xr[i] * inv) * w[i] : xr[i] * inv;
  }
}

}  // namespace dsv41
