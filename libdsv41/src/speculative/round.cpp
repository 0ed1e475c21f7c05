#include "speculative/round.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/check.hpp"
#include "sampling/sampler_impl.hpp"
#include "speculative/acceptance.hpp"

namespace dsv41 {

namespace {

// Session::rollback undoes at most 16 positions; a round rolls back at most its n drafts.
constexpr int kMaxDraftTokens = 15;
// A drafter's probability row may be off 1 by float rounding over the vocabulary (129,280
// terms of ~1e-7 relative error each); more than this is a malformed distribution.
constexpr double kProbSumTol = 1e-3;

// The checks of a drafter's answer: n <= asked, ids in the vocabulary, probs [n, V] rows that
// are distributions giving their own token a non-zero probability. Each row is then divided by
// its sum, so that q is exactly the distribution the acceptance rule assumes.
void check_draft(Draft& d, int asked, int64_t V) {
  const size_t n = d.tokens.size();
  DSV41_CHECK(n <= static_cast<size_t>(asked), kInvalidArgument,
              "the drafter proposed {} tokens, at most {} were asked", n, asked);
  for (size_t k = 0; k < n; ++k)
    DSV41_CHECK(d.tokens[k] >= 0 && d.tokens[k] < V, kInvalidArgument,
                "draft token [{}] = {} is outside the vocabulary [0, {})", k, d.tokens[k], V);
  if (d.probs.empty()) return;
  DSV41_CHECK(d.probs.size() == n * static_cast<size_t>(V), kInvalidArgument,
              "Draft.probs has {} entries, expected {} tokens x vocab {} = {}", d.probs.size(), n,
              V, n * static_cast<size_t>(V));
  for (size_t k = 0; k < n; ++k) {
    float* row = d.probs.data() + k * V;
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) {
      DSV41_CHECK(std::isfinite(row[v]) && row[v] >= 0, kInvalidArgument,
                  "Draft.probs[{}][{}] = {} is not a probability", k, v, row[v]);
      sum += row[v];
    }
    DSV41_CHECK(std::abs(sum - 1.0) <= kProbSumTol, kInvalidArgument,
                "Draft.probs row {} sums to {}, not 1", k, sum);
    DSV41_CHECK(row[d.tokens[k]] > 0, kInvalidArgument,
                "Draft.probs[{}] gives its own token {} probability 0", k, d.tokens[k]);
    for (int64_t v = 0; v < V; ++v) row[v] = static_cast<float>(row[v] / sum);
  }
}

}  // namespace

Status SpeculativeParams::validate() const {
  if (max_draft_tokens < 1 || max_draft_tokens > kMaxDraftTokens)
    return Status(ErrorCode::kInvalidArgument,
                  "SpeculativeParams.max_draft_tokens = " + std::to_string(max_draft_tokens) +
                      " must be in [1, " + std::to_string(kMaxDraftTokens) + "]");
  return Status::ok();
}

namespace speculative {

uint64_t acceptance_seed(const std::optional<int64_t>& seed) {
  if (!seed) {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
  }
  // Not the seed itself: the Sampler seeds its own xoshiro256** with the same request seed, and
  // two identical streams would reuse each uniform (the first acceptance test would reuse the
  // draw that chose `next`, biasing the output). One SplitMix64 step of seed ^ a constant
  // ("SPECULAT" in ASCII) starts an unrelated stream.
  uint64_t state = static_cast<uint64_t>(*seed) ^ 0x53504543554C4154ULL;
  return sampling::splitmix64_next(state);
}

SpeculativeRound run_round(RoundTarget& target, Sampler& sampler, Drafter& drafter,
                           sampling::Xoshiro256StarStar& rng, const RoundLimits& limits,
                           int32_t next, int64_t max_tokens, std::vector<int32_t>& context) {
  const int64_t V = limits.vocab;
  DSV41_CHECK(max_tokens >= 1, kInvalidArgument, "max_tokens = {} must be >= 1", max_tokens);
  DSV41_CHECK(sampler.vocab_size() == V, kInvalidArgument,
              "the sampler's vocab_size {} differs from the model's {}", sampler.vocab_size(), V);
  DSV41_CHECK(next >= 0 && next < V, kInvalidArgument,
              "next = {} is outside the vocabulary [0, {})", next, V);
  DSV41_CHECK(target.room >= 1, kContextOverflow,
              "no room for the next token: position {} is at the maximum context",
              target.tokens.size());
  const int asked = static_cast<int>(
      std::min<int64_t>({limits.max_draft_tokens, max_tokens - 1, target.room - 1}));

  Draft draft;
  if (asked > 0) {
    if (target.propose) {
      draft = DSV41_TAKE(target.propose(next, asked));
    } else {
      context.assign(target.tokens.begin(), target.tokens.end());
      context.push_back(next);
      draft = DSV41_TAKE(drafter.propose(context, asked));
    }
    check_draft(draft, asked, V);
  }
  const int n = static_cast<int>(draft.tokens.size());

  // One forward over [next, d_1 .. d_n]: row k holds the target's logits for the token after
  // d_k (row 0: after next).
  std::vector<int32_t> rows;
  rows.reserve(n + 1);
  rows.push_back(next);
  rows.insert(rows.end(), draft.tokens.begin(), draft.tokens.end());
  const std::vector<float> logits = target.append_all(rows);
  auto row = [&](int k) { return std::span<const float>(logits.data() + k * V, V); };

  SpeculativeRound out;
  out.drafted = n;
  const bool greedy = sampler.params().temperature < kGreedyTemperature;
  try {
    bool ended = false;  // a draft was rejected, or the accepted one is EOS
    for (int k = 0; k < n && !ended; ++k) {
      const int32_t d = draft.tokens[k];
      int32_t token = d;
      bool keep = false;
      if (greedy) {  // argmax after logit_bias / penalties: exactly plain greedy decoding
        token = DSV41_TAKE(sampler.sample(row(k)));
        keep = token == d;
      } else {
        const std::vector<float> p = DSV41_TAKE(sampler.probabilities(row(k)));
        std::span<const float> q;
        if (!draft.probs.empty()) q = std::span<const float>(draft.probs.data() + k * V, V);
        const Verdict v = verify_draft(p, q, d, rng);
        token = v.token;
        keep = v.accepted;
      }
      DSV41_TRY(sampler.accept(token));
      out.tokens.push_back(token);
      if (keep) ++out.accepted;
      ended = !keep || token == limits.eos;
    }
    if (out.accepted == n && (n == 0 || out.tokens.back() != limits.eos)) {  // the bonus token
      const int32_t bonus = DSV41_TAKE(sampler.sample(row(n)));
      DSV41_TRY(sampler.accept(bonus));
      out.tokens.push_back(bonus);
    }
  } catch (...) {
    try {
      target.rollback(n + 1);  // the whole round: the sequence is as before the call
    } catch (...) {
    }
    throw;
  }
  // Kept rows: next and every returned token but the last (the next round's `next`), so the
  // round keeps out.tokens.size() of its n + 1 rows.
  const int64_t rejected = n + 1 - static_cast<int64_t>(out.tokens.size());
  if (rejected > 0) target.rollback(rejected);
  return out;
}

}  // namespace speculative
}  // namespace dsv41
