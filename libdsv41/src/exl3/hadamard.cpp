// Fast Walsh-Hadamard transform in natural (Sylvester) order: log2(128) = 7 butterfly stages.
#include "exl3/hadamard.hpp"

namespace dsv41::exl3 {

namespace {
constexpr float kInvSqrt128 = 0.08838834764831845f;  // 1/sqrt(128)
}

void hadamard128_blocks(float* v, size_t len) {
  for (size_t b = 0; b < len; b += kHadamardSize) {
    float* x = v + b;
    for (size_t h = 1; h < kHadamardSize; h *= 2) {
      for (size_t i = 0; i < kHadamardSize; i += 2 * h) {
        for (size_t j = i; j < i + h; ++j) {
          const float a = x[j], c = x[j + h];
          x[j] = a + c;
          x[j + h] = a - c;
        }
      }
    }
    for (size_t i = 0; i < kHadamardSize; ++i) x[i] *= kInvSqrt128;
  }
}

void hadamard128_unscaled(double* v) {
  for (size_t h = 1; h < kHadamardSize; h *= 2) {
    for (size_t i = 0; i < kHadamardSize; i += 2 * h) {
      for (size_t j = i; j < i + h; ++j) {
        const double a = v[j], c = v[j + h];
        v[j] = a + c;
        v[j + h] = a - c;
      }
    }
  }
}

}  // namespace dsv41::exl3
