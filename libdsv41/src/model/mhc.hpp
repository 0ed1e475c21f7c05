// mHC residual ("single-pass" hyper-connections, spec model-architecture.md
// §3). The residual of one token is H [hc, D] (hc = hc_mult = 4 released). A
// site (attn or ffn of a layer) computes its mixes from the H entering it: pre
// [hc] (handed to the NEXT site's collapse), post [hc] and the Sinkhorn matrix
// comb [hc, hc] with comb[j,k], j = input stream.
#pragma once

#include <cstdint>
#include <vector>

namespace dsv41 {

class ThreadPool;

// One site's parameters (`layers.L.hc_{attn,ffn}_{fn,base,scale}`, F32 in the
// checkpoint).
struct HcSiteWeights {
  std::vector<float> fn;     // [(2+hc)·hc, hc·D]: rows 0..hc-1 pre, hc..2hc-1 post,
                             // then comb j-major
  std::vector<float> base;   // [(2+hc)·hc]
  std::vector<float> scale;  // [3]: pre, post, comb
};

struct HcShape {
  int hc = 4;               // hc_mult
  int64_t dim = 0;          // hidden_size D
  int sinkhorn_iters = 20;  // hc_sinkhorn_iters
  float hc_eps = 1e-6f;     // added to pre and inside Sinkhorn
  float norm_eps = 1e-20f;  // rms_norm_eps of the flatten normalisation
  int mix_dim() const { return (2 + hc) * hc; }
};

// Mixes of T tokens at one site.
struct HcMixes {
  std::vector<float> pre;   // [T, hc]
  std::vector<float> post;  // [T, hc]
  std::vector<float> comb;  // [T, hc, hc]
};

// §3 steps 1-6 for H [T, hc, D]. Tokens are split across `pool` (may be null).
HcMixes hc_mixes(const HcSiteWeights& w, const HcShape& s, const float* H, int64_t T,
                 ThreadPool* pool);

// §3 Sinkhorn on one token's logits L [hc, hc] (row-major, first index j):
// softmax over k + eps, column normalisation, then (iters - 1) × (rows,
// columns). Written in place into `c`.
void hc_sinkhorn(const float* logits, int hc, int iters, float eps, float* c);

// x[t] = Σ_j pre[t, j] · H[t, j] -> x [T, D]; pre [T, hc] is the previous
// site's.
void hc_collapse(const float* H, const float* pre, const HcShape& s, int64_t T, float* x);

// H_new[t, k] = post[t, k] · y[t] + Σ_j comb[t, j, k] · H_old[t, j]; H_new may
// not alias H_old.
void hc_expand(const float* y, const float* H_old, const HcMixes& m, const HcShape& s, int64_t T,
               float* H_new);

// The initial collapse weights: one-hot stream 0, [T, hc].
std::vector<float> hc_initial_pre(const HcShape& s, int64_t T);

}  // namespace dsv41
