// Engine::Impl::speculative_step: one decode step of a request as a speculative round
// (docs/speculative.md): draft (prompt lookup or DSpark), one verify forward, deliver the kept
// tokens through the plain step's deliver().
#include <algorithm>
#include <limits>

#include "core/check.hpp"
#include "runtime/engine_impl.hpp"
#include "speculative/round.hpp"

namespace dsv41 {

bool Engine::Impl::speculative_step(EngineRequest& r) {
  BackendSequence& seq = *r.session->state;
  const ModelInfo& info = model->info;
  const int64_t room =
      std::min({seq.max_context(), max_context, info.max_position_embeddings}) - seq.pos();
  const int64_t left = r.req.stop.max_tokens == kNoTokenLimit ? std::numeric_limits<int64_t>::max()
                                                              : r.req.stop.max_tokens - r.generated;
  const int asked =
      static_cast<int>(std::min<int64_t>({params.speculative_tokens, left - 1, room - 1}));
  if (asked <= 0) return false;
  // Draft first: with nothing proposed the plain step runs (on CUDA it samples on the device
  // and reads no logits back).
  Draft draft;
  if (params.speculative_method == "dspark") {
    draft.tokens =
        model->backend->dspark_draft(seq, r.pending_token, asked, params.speculative_confidence);
  } else {
    draft_context.assign(seq.tokens().begin(), seq.tokens().end());
    draft_context.push_back(r.pending_token);
    draft = DSV41_TAKE(drafter.propose(draft_context, asked));
  }
  if (draft.tokens.empty()) return false;
  if (!r.spec_rng) r.spec_rng.emplace(speculative::acceptance_seed(r.req.sampling.seed));
  speculative::RoundTarget target;
  target.tokens = seq.tokens();
  target.room = room;
  // Round token i was chosen from verify row i: kept for its log-probabilities.
  std::vector<float> rows;
  target.append_all = [&](std::span<const int32_t> ids) {
    std::vector<float> logits = session_append(*r.session, ids, /*all_logits=*/true);
    if (r.req.top_logprobs >= 0) rows = logits;
    return logits;
  };
  target.rollback = [&](int64_t n) { seq.rollback(n); };
  target.propose = [&draft](int32_t, int) { return Result<Draft>(draft); };
  const speculative::RoundLimits limits{params.speculative_tokens, info.vocab_size,
                                        info.eos_token_id};
  const SpeculativeRound round =
      speculative::run_round(target, *r.sampler, drafter, *r.spec_rng, limits, r.pending_token,
                             std::max<int64_t>(left, 1), draft_context);
  {
    std::lock_guard<std::mutex> lock(mu);
    stats.spec_draft_tokens_total += round.drafted;
    stats.spec_accepted_tokens_total += round.accepted;
  }
  const int64_t n = static_cast<int64_t>(round.tokens.size());
  for (int64_t i = 0; i < n; ++i) {
    // Rows this round appended beyond what plain decoding holds once token i is out: the tokens
    // after i but the last. A finish at i rolls them back, so the prefix cache gets the same
    // entry as after plain decoding.
    const float* raw = rows.empty() ? nullptr : rows.data() + i * info.vocab_size;
    if (deliver(r, round.tokens[i], n - 1 - i, raw)) return true;
    r.pending_token = round.tokens[i];
    std::lock_guard<std::mutex> lock(mu);
    if (r.cancelled || stopping) return true;  // the run loop ends it; no further tokens
  }
  return true;
}

}  // namespace dsv41
