#include "sampling/logit_mask.hpp"

#include <algorithm>
#include <limits>

#include "core/check.hpp"

namespace dsv41::sampling {

void keep_only(std::span<float> logits, const std::vector<int32_t>& allowed, const char* who) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  DSV41_CHECK(!allowed.empty(), kInternal, "{}: no token can continue", who);
  std::vector<float> keep(allowed.size());
  for (size_t i = 0; i < allowed.size(); ++i) {
    DSV41_CHECK(allowed[i] >= 0 && static_cast<size_t>(allowed[i]) < logits.size(), kInternal,
                "{}: token {} outside the {} logits", who, allowed[i], logits.size());
    keep[i] = logits[allowed[i]];
  }
  std::fill(logits.begin(), logits.end(), kBanned);
  for (size_t i = 0; i < allowed.size(); ++i)
    logits[allowed[i]] = keep[i] == kBanned ? 0.0f : keep[i];
}

}  // namespace dsv41::sampling
