// SpeculativeDecoder: draft-then-verify decoding of one Session (spec model-architecture.md §6.4,
// docs/speculative.md). Each round a Drafter proposes up to n tokens after the pending token; one
// forward of the target over [next, d_1 .. d_n] scores them all; the drafts the target accepts are
// kept, the first rejected one is replaced by a token of the target, and the rows after it are
// rolled back. Greedy samplers accept a draft iff it is the target's argmax, so the tokens equal
// plain greedy decoding; sampling samplers use speculative rejection sampling (Leviathan et al.
// 2023, Chen et al. 2023), so every token is distributed exactly as the Sampler alone would draw
// it.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "dsv41/export.hpp"
#include "dsv41/model.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "dsv41/status.hpp"

namespace dsv41 {

// Proposed continuation of one round.
struct Draft {
  std::vector<int32_t> tokens;  // d_1 .. d_n
  // The drafter's distribution of each d_k: [n, vocab] floats summing to 1 per row (within 1e-3;
  // rows are renormalised), when the drafter sampled its tokens. Empty: deterministic proposals
  // (q = one-hot at d_k).
  std::vector<float> probs;
};

// A source of drafts: the n-gram drafter below, or the caller's own (a smaller model, a cache).
class Drafter {
 public:
  virtual ~Drafter() = default;
  // context = the session's committed tokens followed by the pending token `next` (the last
  // entry). At most max_tokens (>= 1) tokens; fewer or none is fine. Must not throw: report
  // failures through the Result.
  [[nodiscard]] virtual Result<Draft> propose(std::span<const int32_t> context, int max_tokens) = 0;
};

// Prompt lookup (the "ngram" method of vLLM/SGLang): the longest suffix of the context of
// max_ngram .. min_ngram tokens that occurred before; the tokens that followed its most recent
// earlier occurrence (with a continuation of the full draft length, when one has it) are the
// draft. Free to run, and effective where output repeats the input
// (code edits, quoting, structured output).
struct NgramDrafterParams {
  int min_ngram = 2;  // >= 1
  int max_ngram = 4;  // >= min_ngram, <= 64
  // Tokens searched back from the end of the context; 0 = the whole context.
  int64_t lookback = 0;
  // "NgramDrafterParams.max_ngram = 1 must be >= min_ngram = 2".
  [[nodiscard]] Status validate() const;
};
[[nodiscard]] DSV41_API Result<std::unique_ptr<Drafter>> make_ngram_drafter(
    const NgramDrafterParams& params = {});

// DSpark (spec §6): the model's own draft module `mtp.*`, run on the sequence's target features.
// Needs a Model loaded with ModelParams.dspark (CPU backend, world 1). Its drafts come from the
// sequence's state, so it drafts only through SpeculativeDecoder::step (its propose() answers
// kUnsupported).
struct DsparkDrafterParams {
  // Verify only the confident prefix of the block: cut before the first draft whose survival
  // Π c_i (confidence head) is below this. 0 = verify the whole block; DeepSpec uses 0.5.
  float confidence_threshold = 0.0f;  // [0, 1]
  [[nodiscard]] Status validate() const;
};
// kUnsupported when `model` was loaded without ModelParams.dspark.
[[nodiscard]] DSV41_API Result<std::unique_ptr<Drafter>> make_dspark_drafter(
    const Model& model, const DsparkDrafterParams& params = {});

struct SpeculativeParams {
  // Drafted tokens per round, 1..15: the verify forward holds 1 + n rows and the rejected ones
  // are rolled back (Session::rollback depth 16). DSpark drafts 5 (dspark_block_size).
  int max_draft_tokens = 5;
  // Seed of the acceptance draws (sampling samplers only; a stream derived from it, so it may
  // equal the Sampler's seed); absent: std::random_device.
  std::optional<int64_t> seed;
  [[nodiscard]] Status validate() const;
};

struct SpeculativeRound {
  // The tokens produced after `next`: the accepted drafts, then one token of the target (the
  // residual sample at the first rejection, or the bonus token after n accepted drafts). Ends
  // early at the model's EOS or at max_tokens.
  std::vector<int32_t> tokens;
  int drafted = 0;   // drafts verified this round
  int accepted = 0;  // of them, kept
};

struct SpeculativeStats {
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t emitted = 0;  // tokens returned by step()
  // accepted / drafted, 0 before any draft.
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
};

class DSV41_API SpeculativeDecoder {
 public:
  // The drafter is owned by the decoder (not null). Errors: kInvalidArgument naming the field.
  [[nodiscard]] static Result<SpeculativeDecoder> create(const Model& model,
                                                         std::unique_ptr<Drafter> drafter,
                                                         const SpeculativeParams& params = {});
  SpeculativeDecoder(SpeculativeDecoder&&) noexcept;
  SpeculativeDecoder& operator=(SpeculativeDecoder&&) noexcept;
  SpeculativeDecoder(const SpeculativeDecoder&) = delete;
  SpeculativeDecoder& operator=(const SpeculativeDecoder&) = delete;
  ~SpeculativeDecoder();

  // One round. `next`: the token already drawn from the logits of the session's last position
  // and passed to sampler.accept(), not yet appended. Appends next and the drafts in one forward,
  // keeps what the target accepts and rolls back the rest. Every returned token has been passed
  // to sampler.accept(); all but the last are appended to the session: the last one is the
  // `next` of the following round. At most max_tokens (>= 1) tokens are returned; drafts are
  // cut so that next + drafts fit the session's context.
  //
  // Errors: kInvalidArgument (next outside the vocabulary, a sampler of another vocabulary,
  // max_tokens < 1, a draft token outside the vocabulary or a malformed Draft.probs: the
  // session is unchanged), kContextOverflow (no room for `next`), the session's append errors,
  // the drafter's errors (returned as they are; the session is unchanged), and the sampler's
  // errors on the target's logits (the round is rolled back: the session is as before the call,
  // but the sampler keeps the drafts it had accepted).
  [[nodiscard]] Result<SpeculativeRound> step(
      Session& session, Sampler& sampler, int32_t next,
      int64_t max_tokens = std::numeric_limits<int64_t>::max());

  const SpeculativeStats& stats() const;
  const SpeculativeParams& params() const;

  struct Impl;

 private:
  explicit SpeculativeDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv41
