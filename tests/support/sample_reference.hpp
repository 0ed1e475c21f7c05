// The Sampler chain driven by a SamplePlan on the host (docs/sampling.md steps 1-8, built from the
// CPU stages of truncation.hpp), with how close the decision came to a boundary: the draw's
// |u·total - cumulative| and top_p's |remainder - (1 - top_p)|, both relative to the total.
// Tests use it to tell a real mismatch from a last-ulp knife edge of reordered fp64 sums.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "sampling/device_sample_plan.hpp"
#include "sampling/truncation.hpp"

namespace dsv41::test {

struct ReferenceSample {
  int32_t token = -1;
  bool valid = false;         // false: the CPU chain would reject these logits
  double draw_margin = 1.0;   // min distance of u·total to the chosen token's two boundaries
  double top_p_margin = 1.0;  // distance of the cut's remainder to 1 - top_p (both sides)
};

// Steps 1-8 for plan on logits (already masked); the same stages as Sampler::run_chain.
inline ReferenceSample reference_sample(const sampling::SamplePlan& plan,
                                        std::span<const float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  ReferenceSample out;
  std::vector<float> work(logits.begin(), logits.end());
  for (float v : work)
    if (std::isnan(v) || v == INFINITY) return out;
  if (std::all_of(work.begin(), work.end(), [](float v) { return v == kNegInf; })) return out;
  sampling::DeviceSampling::apply_adjustments(work, plan);
  const float m = sampling::max_logit(work);
  if (m == kNegInf || m == INFINITY) return out;
  out.valid = true;
  if (plan.greedy) {
    out.token = sampling::argmax_lowest_id(work);
    return out;
  }
  for (float& v : work)
    if (v != kNegInf) v = (v - m) / plan.temperature;
  if (plan.min_p > 0.0f) sampling::apply_min_p(work, plan.min_p);
  if (plan.top_k > 0) sampling::apply_top_k(work, plan.top_k);
  if (plan.top_p < 1.0f) {
    // The margin of the cut: the sorted prefix just before and at the last kept token.
    std::vector<float> before = work;
    sampling::apply_top_p(work, plan.top_p);
    std::vector<int32_t> order;
    for (size_t i = 0; i < before.size(); ++i)
      if (before[i] != kNegInf) order.push_back(static_cast<int32_t>(i));
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return before[a] != before[b] ? before[a] > before[b] : a < b;
    });
    double total = 0.0;
    for (int32_t id : order) total += std::exp(static_cast<double>(before[id]));
    const double drop = 1.0 - static_cast<double>(plan.top_p);
    // The kept tokens are a prefix of `order`: the stop test failed at the rank before the
    // last kept one and held at it.
    const size_t kept = static_cast<size_t>(
        std::count_if(order.begin(), order.end(), [&](int32_t id) { return work[id] != kNegInf; }));
    double prefix = 0.0;
    out.top_p_margin = 1.0;
    for (size_t r = 0; r < kept; ++r) {
      prefix += std::exp(static_cast<double>(before[order[r]]));
      if (r + 2 >= kept)
        out.top_p_margin = std::min(out.top_p_margin, std::abs((total - prefix) / total - drop));
    }
  }
  double total = 0.0;
  const std::vector<double> w = sampling::exp_weights(work, total);
  const double target = plan.uniform * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0.0) continue;
    const double lo = cumulative;
    cumulative += w[i];
    out.token = static_cast<int32_t>(i);
    out.draw_margin = std::min(std::abs(target - lo), std::abs(cumulative - target)) / total;
    if (target < cumulative) break;
  }
  return out;
}

}  // namespace dsv41::test
