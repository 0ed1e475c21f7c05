// The truncation stages of the sampling chain (docs/sampling.md §Chain, steps 5-7): each takes
// logits already divided by the temperature and sets the logits of dropped tokens to -inf.
// Probabilities are computed in double from exp(logit - max), so no stage over/underflows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv41::sampling {

// Largest finite logit; -inf when there is none.
float max_logit(std::span<const float> logits);
// Index of the largest logit, the lowest index among equal maxima (greedy's tie rule).
int32_t argmax_lowest_id(std::span<const float> logits);

// min_p in (0, 1]: drop t with p[t] < min_p * max p, i.e. exp(logit[t] - max) < min_p
// (vLLM MinPLogitsProcessor). The most likely token always survives.
void apply_min_p(std::span<float> logits, float min_p);
// top_k >= 1: drop t with logit[t] < the k-th largest logit. Tokens tied with the k-th value
// are all kept (vLLM apply_top_k_top_p compares against the k-th sorted value), so more than k
// may survive. top_k >= vocab size is a no-op.
void apply_top_k(std::span<float> logits, int32_t top_k);
// top_p in (0, 1): order the surviving tokens by (probability descending, id ascending); walk
// from the least likely end accumulating probability and drop tokens while the accumulated
// mass is <= 1 - top_p; the most likely token is never dropped (vLLM apply_top_k_top_p).
void apply_top_p(std::span<float> logits, float top_p);

// exp(logit - max) per token (0 for -inf), as double; `total` receives their sum (>= 1).
std::vector<double> exp_weights(std::span<const float> logits, double& total);

}  // namespace dsv41::sampling
