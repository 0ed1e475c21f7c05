// One speculative round on any sequence (Session, or the Engine's requests): draft, one verify
// forward of 1 + n rows, the acceptance rule of acceptance.hpp, rollback of the rejected rows.
// The public SpeculativeDecoder (runtime/speculative_decoder.cpp) and the Engine's speculative
// decode steps both run it. Spec: model-architecture.md §6.4; docs/speculative.md.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "dsv41/sampler.hpp"
#include "dsv41/speculative.hpp"
#include "sampling/rng.hpp"

namespace dsv41::speculative {

// The sequence a round verifies on. Both callbacks throw detail::Failure on error.
struct RoundTarget {
  std::span<const int32_t> tokens;  // committed tokens
  int64_t room = 0;                 // positions left before the sequence's maximum context
  // Appends ids and returns the logits of every appended row [ids.size(), vocab].
  std::function<std::vector<float>(std::span<const int32_t>)> append_all;
  // Undoes the last n appended positions.
  std::function<void(int64_t)> rollback;
  // Optional: the drafts after `next` from elsewhere (the sequence's DSpark state, a draft made
  // beforehand) instead of Drafter::propose on the copied context.
  std::function<Result<Draft>(int32_t next, int max_tokens)> propose;
};

struct RoundLimits {
  int max_draft_tokens = 5;  // SpeculativeParams.max_draft_tokens
  int64_t vocab = 0;
  int32_t eos = 1;  // an accepted EOS ends the round
};

// One round after the pending token `next` (already drawn and passed to sampler.accept(), not
// yet appended), returning at most max_tokens tokens, each passed to sampler.accept(); all but
// the last are left appended (SpeculativeDecoder::step in dsv41/speculative.hpp has the
// contract and the error cases). `context` is scratch for the drafter's input (not touched when
// target.propose is set). Throws
// detail::Failure; a failure after the verify forward rolls the whole round back.
SpeculativeRound run_round(RoundTarget& target, Sampler& sampler, Drafter& drafter,
                           sampling::Xoshiro256StarStar& rng, const RoundLimits& limits,
                           int32_t next, int64_t max_tokens, std::vector<int32_t>& context);

// The acceptance draws' seed: `seed`, or std::random_device when absent.
uint64_t acceptance_seed(const std::optional<int64_t>& seed);

}  // namespace dsv41::speculative
