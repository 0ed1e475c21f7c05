#include "sampling/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dsv41::sampling {

PositionLogprobs position_logprobs(std::span<const float> logits, int32_t chosen, int top_n) {
  const int64_t V = static_cast<int64_t>(logits.size());
  float max = -std::numeric_limits<float>::infinity();
  bool bad = false;
  for (float x : logits) {
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity()) bad = true;
    max = std::max(max, x);
  }
  double lse = std::numeric_limits<double>::quiet_NaN();
  if (!bad && std::isfinite(max)) {
    double sum = 0.0;
    for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
    lse = static_cast<double>(max) + std::log(sum);
  }
  auto logprob = [&](int64_t i) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(i)]) - lse);
  };
  PositionLogprobs out;
  out.chosen = {chosen, chosen >= 0 && chosen < V ? logprob(chosen)
                                                  : std::numeric_limits<float>::quiet_NaN()};
  const int64_t n = std::min<int64_t>(std::max(top_n, 0), V);
  if (n == 0) return out;
  // A min-heap of the n best (logit desc, id asc) seen so far: O(V log n) for n <= 20.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> heap;
  heap.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < V; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (static_cast<int64_t>(heap.size()) < n) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  for (int32_t id : heap) out.top.push_back({id, logprob(id)});
  return out;
}

}  // namespace dsv41::sampling
