// Prompt-lookup drafter (NgramDrafterParams in dsv41/speculative.hpp): proposes the tokens that
// followed the most recent earlier occurrence of the context's longest matching suffix n-gram.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dsv41/speculative.hpp"

namespace dsv41::speculative {

// The draft of prompt lookup on `context` (at most max_tokens tokens, possibly none): for
// n = max_ngram down to min_ngram, the last n tokens are searched for in context[begin, end - n),
// begin = end - lookback (0 = whole context), latest start first; the latest hit with a full
// max_tokens continuation (else the one with the longest) gives the draft. O(lookback ·
// max_ngram) per call.
std::vector<int32_t> ngram_lookup(std::span<const int32_t> context, const NgramDrafterParams& p,
                                  int max_tokens);

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(const NgramDrafterParams& p) : params_(p) {}
  Result<Draft> propose(std::span<const int32_t> context, int max_tokens) override;

 private:
  NgramDrafterParams params_;
};

}  // namespace dsv41::speculative
