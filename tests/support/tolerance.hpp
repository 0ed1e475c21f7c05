// Comparison helpers whose failure output says where and by how much (worst element, its index,
// both values, the first values of each side).
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>

namespace dsv41::test {

struct DiffReport {
  double max_abs = 0;
  size_t worst = 0;
  size_t n_nonfinite_mismatch = 0;
};

template <typename A, typename B>
DiffReport compare(const A& got, const B& want, size_t n) {
  DiffReport r;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    if (std::isinf(g) || std::isinf(w) || std::isnan(g) || std::isnan(w)) {
      if (!(g == w || (std::isnan(g) && std::isnan(w)))) {
        if (r.n_nonfinite_mismatch++ == 0) r.worst = i;
        r.max_abs = INFINITY;
      }
      continue;
    }
    const double d = std::fabs(g - w);
    if (d > r.max_abs) {
      r.max_abs = d;
      r.worst = i;
    }
  }
  return r;
}

// REQUIRE that |got - want| <= tol elementwise; on failure prints the worst element.
template <typename A, typename B>
void require_close(const std::string& what, const A& got, const B& want, size_t n, double tol) {
  DiffReport r = compare(got, want, n);
  std::ostringstream msg;
  msg << what << ": max |diff| " << r.max_abs << " at flat index " << r.worst << " (got "
      << (n ? static_cast<double>(got[r.worst]) : 0.0) << ", want "
      << (n ? static_cast<double>(want[r.worst]) : 0.0) << "), tolerance " << tol << ", n " << n;
  INFO(msg.str());
  REQUIRE(r.max_abs <= tol);
}

}  // namespace dsv41::test
