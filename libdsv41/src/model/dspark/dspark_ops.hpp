// The DSpark-specific steps of spec model-architecture.md §6 as plain fp32 loops: the executable
// spec that DsparkDrafter and Transformer run and that the CUDA kernels (dsv41k/dspark.hpp) are
// judged against op by op.
#pragma once

#include <cstdint>

namespace dsv41 {

// §6.2 target feature of one tap: out[t, :] = (Σ_j H[t, j, :]) / hc, summed over j in order.
//   H [T, hc, D]; out rows `out_stride` floats apart (the taps of a row are interleaved).
void hc_stream_mean(const float* H, int64_t T, int hc, int64_t D, float* out, int64_t out_stride);

// §6.3 block attention of one stage, after the projections: query t of the block (position
// pos0 + t, post-RoPE) attends to the n_ctx context rows then all K block rows (no causal mask
// inside the block), one softmax with the head's sink, scores scaled by 1/sqrt(D); then the
// inverse RoPE of the output's last R channels at pos0 + t.
//   q [K, H, D]; ctx [n_ctx] row pointers (D floats each, FP8-rounded); block [K, D] (FP8-rounded);
//   sink [H]; inv_freq [R/2]; o [K, H, D].
void dspark_attend(const float* q, const float* const* ctx, int64_t n_ctx, const float* block,
                   const float* sink, const float* inv_freq, int64_t K, int64_t H, int64_t D, int R,
                   int64_t pos0, float* o);

// §6.3 Markov step k: argmax over v of u[v] + markov[v] (the first maximum; NaN sums are never
// picked; 0 when every sum is NaN).
int32_t dspark_markov_pick(const float* u, const float* markov, int64_t V);

// §6.3 confidence c_k = sigmoid(w · [h ; e]) = 1 / (1 + exp(-z)), z summed in order over the D
// hidden then the R Markov-embedding values.  w [D + R], h [D], e [R].
float dspark_confidence(const float* w, const float* h, int64_t D, const float* e, int64_t R);

}  // namespace dsv41
