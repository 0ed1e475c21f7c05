// Comparisons of device results with the CPU reference shared by the kernel-tier model tests:
// the largest absolute difference with its index, and logits rows within a tolerance with the
// same argmax on every row. Failures print where and by how much.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dsv41::test {

struct MaxDiff {
  double worst = 0;
  size_t at = 0;
};

// max |got[i] - want[i]| and its first index (a NaN on either side counts as the worst).
inline MaxDiff max_abs_diff(const std::vector<float>& got, const std::vector<float>& want) {
  MaxDiff m;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= m.worst)) {
      m.worst = d;
      m.at = i;
    }
  }
  return m;
}

inline int64_t argmax_row(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// Logits [rows, V]: max |diff| <= tol, and the same argmax on every row.
inline void require_logits(const std::string& what, const std::vector<float>& got,
                           const std::vector<float>& want, int64_t V, double tol) {
  REQUIRE(got.size() == want.size());
  const MaxDiff m = max_abs_diff(got, want);
  std::printf("%s: max |logits diff| %.3g at row %zu col %zu (tol %.1g)\n", what.c_str(), m.worst,
              m.at / V, m.at % V, tol);
  INFO(what << ": max |diff| " << m.worst << " at row " << m.at / V << " col " << m.at % V
            << " (got " << got[m.at] << ", want " << want[m.at] << "), tol " << tol);
  REQUIRE(m.worst <= tol);
  for (size_t r = 0; r < got.size() / V; ++r) {
    INFO(what << ": argmax of row " << r);
    REQUIRE(argmax_row(got.data() + r * V, V) == argmax_row(want.data() + r * V, V));
  }
}

}  // namespace dsv41::test
