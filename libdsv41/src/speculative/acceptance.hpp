// Speculative rejection sampling of one drafted token (Leviathan et al. 2023, "Fast Inference from
// Transformers via Speculative Decoding", Algorithm 1; Chen et al. 2023): the draft d, drawn from
// q, is kept with probability min(1, p(d) / q(d)); otherwise a token is drawn from the residual
// max(0, p - q) / sum. The kept-or-replaced token is then distributed exactly as p, whatever q is.
// Spec: model-architecture.md §6.4; docs/speculative.md.
#pragma once

#include <cstdint>
#include <span>

#include "sampling/rng.hpp"

namespace dsv41::speculative {

struct Verdict {
  bool accepted = false;
  int32_t token = -1;  // the draft when accepted, else the residual sample
};

// p: the target distribution [V] (the Sampler's probabilities, sum 1). q: the draft distribution
// [V], or empty for a deterministic draft (q = one-hot at `draft`). Draws one uniform for the
// test and, on rejection, one for the residual sample. When the residual has no mass (p <= q
// everywhere up to rounding) the token is drawn from p.
Verdict verify_draft(std::span<const float> p, std::span<const float> q, int32_t draft,
                     sampling::Xoshiro256StarStar& rng);

// Inverse-CDF draw from the non-negative weights w [V] (need not sum to 1; the sum must be > 0):
// the first index whose running sum exceeds u * sum, never an index of weight 0.
int32_t sample_weights(std::span<const double> w, double u);

}  // namespace dsv41::speculative
