#include "speculative/acceptance.hpp"

#include <algorithm>
#include <vector>

#include "core/check.hpp"

namespace dsv41::speculative {

int32_t sample_weights(std::span<const double> w, double u) {
  double total = 0;
  for (double v : w) total += v;
  DSV41_CHECK(total > 0, kInternal, "residual distribution has no mass");
  const double target = u * total;
  double run = 0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    run += w[i];
    last = static_cast<int32_t>(i);
    if (run > target) return last;
  }
  return last;  // u * total rounded up to the full sum: the last token with mass
}

Verdict verify_draft(std::span<const float> p, std::span<const float> q, int32_t draft,
                     sampling::Xoshiro256StarStar& rng) {
  const size_t V = p.size();
  DSV41_CHECK(draft >= 0 && static_cast<size_t>(draft) < V, kInternal,
              "draft token {} outside the vocabulary [0, {})", draft, V);
  DSV41_CHECK(q.empty() || q.size() == V, kInternal, "draft distribution has {} entries, not {}",
              q.size(), V);
  const double pd = p[draft];
  const double qd = q.empty() ? 1.0 : q[draft];
  // Keep with probability min(1, p/q); q(d) = 0 cannot have produced d, so it is rejected.
  const double u = rng.uniform();
  if (qd > 0 && u * qd < pd) return {true, draft};
  std::vector<double> residual(V);
  double mass = 0;
  for (size_t i = 0; i < V; ++i) {
    const double qi = q.empty() ? (i == static_cast<size_t>(draft) ? 1.0 : 0.0) : q[i];
    residual[i] = std::max(0.0, static_cast<double>(p[i]) - qi);
    mass += residual[i];
  }
  if (mass <= 0) {  // p == q up to rounding: the rejection itself had probability ~0
    for (size_t i = 0; i < V; ++i) residual[i] = p[i];
  }
  return {false, sample_weights(residual, rng.uniform())};
}

}  // namespace dsv41::speculative
