#include "speculative/ngram_drafter.hpp"

#include <algorithm>
#include <string>

namespace dsv41 {

Status NgramDrafterParams::validate() const {
  auto bad = [](const std::string& what) {
    return Status(ErrorCode::kInvalidArgument, "NgramDrafterParams." + what);
  };
  if (min_ngram < 1) return bad("min_ngram = " + std::to_string(min_ngram) + " must be >= 1");
  if (max_ngram < min_ngram)
    return bad("max_ngram = " + std::to_string(max_ngram) +
               " must be >= min_ngram = " + std::to_string(min_ngram));
  if (max_ngram > 64) return bad("max_ngram = " + std::to_string(max_ngram) + " must be <= 64");
  if (lookback < 0) return bad("lookback = " + std::to_string(lookback) + " must be >= 0");
  return Status::ok();
}

Result<std::unique_ptr<Drafter>> make_ngram_drafter(const NgramDrafterParams& params) {
  Status st = params.validate();
  if (!st.is_ok()) return st;
  return std::unique_ptr<Drafter>(std::make_unique<speculative::NgramDrafter>(params));
}

namespace speculative {

std::vector<int32_t> ngram_lookup(std::span<const int32_t> context, const NgramDrafterParams& p,
                                  int max_tokens) {
  const int64_t L = static_cast<int64_t>(context.size());
  const int64_t begin = p.lookback > 0 ? std::max<int64_t>(0, L - p.lookback) : 0;
  if (max_tokens < 1) return {};
  for (int64_t n = std::min<int64_t>(p.max_ngram, L - 1); n >= p.min_ngram; --n) {
    const int32_t* suffix = context.data() + L - n;
    // Candidate starts s < L - n, so the match is strictly earlier than the suffix itself and
    // at least one token follows it. The latest match wins unless its continuation is shorter
    // than max_tokens (a repeat of period P leaves only P tokens after the latest match): then
    // the latest match with the longest continuation.
    int64_t best_from = -1, best_len = 0;
    for (int64_t s = L - n - 1; s >= begin; --s) {
      if (!std::equal(suffix, suffix + n, context.data() + s)) continue;
      const int64_t from = s + n, len = std::min<int64_t>(L - from, max_tokens);
      if (len > best_len) {
        best_from = from;
        best_len = len;
      }
      if (len == max_tokens) break;
    }
    if (best_from >= 0)
      return std::vector<int32_t>(context.begin() + best_from,
                                  context.begin() + best_from + best_len);
  }
  return {};
}

Result<Draft> NgramDrafter::propose(std::span<const int32_t> context, int max_tokens) {
  Draft d;
  d.tokens = ngram_lookup(context, params_, max_tokens);
  return d;
}

}  // namespace speculative
}  // namespace dsv41
