// min-p, top-k and top-p truncation (see truncation.hpp).
#include "sampling/truncation.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

namespace dsv41::sampling {

namespace {

constexpr float kDropped = -std::numeric_limits<float>::infinity();

}  // namespace

float max_logit(std::span<const float> logits) {
  float m = kDropped;
  for (float v : logits) m = std::max(m, v);
  return m;
}

int32_t argmax_lowest_id(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);  // strict: first max wins
  }
  return best;
}

void apply_min_p(std::span<float> logits, float min_p) {
  const double m = max_logit(logits);
  const double threshold = min_p;
  for (float& v : logits) {
    if (v == kDropped) continue;
    if (std::exp(static_cast<double>(v) - m) < threshold) v = kDropped;
  }
}

void apply_top_k(std::span<float> logits, int32_t top_k) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= logits.size()) return;
  std::vector<float> sorted(logits.begin(), logits.end());
  std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                   std::greater<float>());
  const float kth = sorted[top_k - 1];
  for (float& v : logits) {
    if (v < kth) v = kDropped;
  }
}

void apply_top_p(std::span<float> logits, float top_p) {
  if (top_p >= 1.0f) return;
  std::vector<int32_t> order;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kDropped) order.push_back(static_cast<int32_t>(i));
  }
  if (order.size() <= 1) return;
  const double m = max_logit(logits);
  double total = 0.0;
  for (int32_t id : order) total += std::exp(static_cast<double>(logits[id]) - m);
  const auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  // Dropping the tail while its mass is <= 1 - top_p keeps the shortest most-likely prefix
  // whose remainder (total - prefix) / total is <= 1 - top_p. Only a block containing that
  // prefix is sorted: grow the top block (nth_element, O(n)) 4x at a time until its remainder
  // is small enough, then sort just the block. A full sort of 129k ids is ~10x slower.
  const double drop_mass = 1.0 - static_cast<double>(top_p);
  const auto weight = [&](int32_t id) { return std::exp(static_cast<double>(logits[id]) - m); };
  size_t block = 0;
  double block_mass = 0.0;
  for (size_t want = std::min<size_t>(256, order.size());;
       want = std::min(order.size(), want * 4)) {
    if (want < order.size()) {
      std::nth_element(order.begin() + block, order.begin() + want, order.end(), more_likely);
    }
    for (size_t r = block; r < want; ++r) block_mass += weight(order[r]);
    block = want;
    if (block == order.size() || (total - block_mass) / total <= drop_mass) break;
  }
  std::sort(order.begin(), order.begin() + block, more_likely);
  size_t keep = block;
  double prefix = 0.0;
  for (size_t r = 0; r < block; ++r) {
    prefix += weight(order[r]);
    if ((total - prefix) / total <= drop_mass) {
      keep = r + 1;
      break;
    }
  }
  for (size_t r = keep; r < order.size(); ++r) logits[order[r]] = kDropped;
}

std::vector<double> exp_weights(std::span<const float> logits, double& total) {
  const double m = max_logit(logits);
  std::vector<double> w(logits.size(), 0.0);
  total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kDropped) continue;
    w[i] = std::exp(static_cast<double>(logits[i]) - m);
    total += w[i];
  }
  return w;
}

}  // namespace dsv41::sampling
