// The attention core of one sublayer (spec model-architecture.md §2.2 steps 4-6, §2.6): every
// query attends, in ONE softmax, to its window keys (t-W, t] and to the compressed entries its
// index selection picked, with the per-head sink logit in the denominator only; the output is
// rotated back by the inverse RoPE at the query position. The window keys come from the packed
// FP8 ring (positions < pos0) and from this call's fake-quantised K=V rows (positions >= pos0);
// the compressed entries from the KV source's packed FP4 cache (§2.8). Plain fp32 loops: the
// executable spec of the CUDA kernel kernels/attention/window_sparse_attention.cu.
#pragma once

#include <cstdint>

#include "model/attention/attention_state.hpp"

namespace dsv41 {

class ThreadPool;

// Shapes (row-major):
//   q        [T, H, D] fp32 queries, RoPE already applied to the last R values of each head
//   new_kv   [T, D] fp32 K=V rows of positions pos0 + t (post-RoPE, fake-quantised FP8, §2.7)
//   ring     the layer's window ring; must hold positions [max(0, pos0-W+1), pos0)
//   selection, source (both null on ratio-0 layers): selection->index [T, topk] entry ids into
//            source->cache (-1 = none); entry ids >= source->n_entries are kInvalidArgument
//   sink     [H] per-head sink logits
//   inv_freq [R/2] the layer's RoPE table (inverse rotation of the output)
//   o        [T, H, D] fp32 output
// Per (t, h), keys in this order: window positions first..pos (first = max(0, pos-W+1),
// pos = pos0+t), then the selected entries in selection order (skipping -1):
//   s_j = (Σ_c q[c]·k_j[c]) · D^-0.5     (sequential fp32 sum over c, no FMA)
//   m = max(sink, max_j s_j); e_j = exp(s_j - m); denom = exp(sink - m) + e_0 + e_1 + ...
//   o[c] = Σ_j (e_j / denom) · k_j[c]    (sequential over j); then inverse RoPE at pos.
// layer: only for error messages.
void window_sparse_attention(const float* q, const float* new_kv, int64_t T, int64_t H, int64_t D,
                             int R, int64_t W, int64_t pos0, const WindowRing& ring,
                             const IndexSelection* selection, const CsaSourceState* source,
                             const float* sink, const float* inv_freq, int layer, float* o,
                             ThreadPool* pool);

}  // namespace dsv41
