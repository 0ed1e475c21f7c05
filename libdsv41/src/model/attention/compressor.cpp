// Compressor (§2.3): fp32 projections, per-channel softmax pooling over each group of `ratio`
// tokens, compressor.norm; then RoPE at the group's first position and FP4 into the cache.
#include "model/attention/compressor.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "config/model_config.hpp"
#include "core/check.hpp"
#include "model/attention/attention_state.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/rms_norm.hpp"

namespace dsv41 {

Compressor Compressor::bind(const Checkpoint& ck, const ModelConfig& cfg, int layer) {
  const TextConfig& t = cfg.text;
  Compressor c;
  c.layer_ = layer;
  c.ratio_ = t.compress_ratios.at(layer);
  DSV41_CHECK(c.ratio_ >= 1, kInvalidArgument,
              "layer {}: a compressor needs compress_ratios[{}] >= 1, got {}", layer, layer,
              c.ratio_);
  c.hidden_ = t.hidden_size;
  c.head_dim_ = t.head_dim;
  c.eps_ = static_cast<float>(t.rms_norm_eps);
  const std::string p = "layers." + std::to_string(layer) + ".attn.compressor.";
  c.wkv_ = Linear::bind(ck, p + "wkv", t.head_dim, t.hidden_size, cfg.quant);
  if (c.ratio_ > 1) c.wgate_ = Linear::bind(ck, p + "wgate", t.head_dim, t.hidden_size, cfg.quant);
  c.norm_ = load_vector(ck, p + "norm.weight", t.head_dim);
  return c;
}

CompressedGroups Compressor::run(const float* x, int64_t T, CsaSourceState& st,
                                 ThreadPool* pool) const {
  const int64_t D = head_dim_;
  DSV41_CHECK(st.ratio == ratio_ && st.head_dim == head_dim_, kInternal,
              "layer {}: compressor state has ratio {} / head_dim {}, layer has {} / {}", layer_,
              st.ratio, st.head_dim, ratio_, head_dim_);
  CompressedGroups g;
  g.first_entry = st.n_entries;
  if (T == 0) return g;
  std::vector<float> kv(T * D);
  wkv_.forward(x, T, kv.data(), pool);
  if (ratio_ == 1) {  // every token is a group; no gate, no pooling
    g.n_groups = T;
    g.latent.resize(T * D);
    rms_norm(kv.data(), norm_.data(), T, D, eps_, g.latent.data());
    return g;
  }
  std::vector<float> gate(T * D);
  wgate_.forward(x, T, gate.data(), pool);
  // Rollback history: the rows of the newest recent_capacity positions (attention_state.hpp).
  const int64_t p0 = st.next_pos(), cap = st.recent_capacity;
  for (int64_t t = std::max<int64_t>(0, T - cap); t < T; ++t) {
    const int64_t slot = (p0 + t) % cap;
    std::copy_n(kv.begin() + t * D, D, st.recent_kv.begin() + slot * D);
    std::copy_n(gate.begin() + t * D, D, st.recent_gate.begin() + slot * D);
  }
  // Buffered tokens of the open group come first: rows [pending + T] of kv / gate.
  const int64_t n_rows = st.pending + T;
  std::vector<float> all_kv(n_rows * D), all_gate(n_rows * D);
  std::copy(st.pending_kv.begin(), st.pending_kv.begin() + st.pending * D, all_kv.begin());
  std::copy(st.pending_gate.begin(), st.pending_gate.begin() + st.pending * D, all_gate.begin());
  std::copy(kv.begin(), kv.end(), all_kv.begin() + st.pending * D);
  std::copy(gate.begin(), gate.end(), all_gate.begin() + st.pending * D);
  g.n_groups = n_rows / ratio_;
  const int64_t used = g.n_groups * ratio_;
  g.latent.assign(g.n_groups * D, 0.0f);
  compressor_pool(all_kv.data(), all_gate.data(), g.n_groups, ratio_, D, g.latent.data());
  rms_norm(g.latent.data(), norm_.data(), g.n_groups, D, eps_, g.latent.data());
  st.pending = static_cast<int>(n_rows - used);
  st.pending_kv.assign(all_kv.begin() + used * D, all_kv.end());
  st.pending_gate.assign(all_gate.begin() + used * D, all_gate.end());
  return g;
}

void compressor_pool(const float* kv, const float* gate, int64_t n_groups, int ratio, int64_t D,
                     float* latent) {
  std::vector<float> w(ratio);
  for (int64_t j = 0; j < n_groups; ++j) {
    float* lat = latent + j * D;
    for (int64_t c = 0; c < D; ++c) {
      // softmax over the group's tokens, per channel: exp(g - max) / Σ exp(g - max)
      float m = -INFINITY;
      for (int r = 0; r < ratio; ++r) m = std::max(m, gate[(j * ratio + r) * D + c]);
      float sum = 0.0f;
      for (int r = 0; r < ratio; ++r) {
        w[r] = std::exp(gate[(j * ratio + r) * D + c] - m);
        sum += w[r];
      }
      float acc = 0.0f;
      for (int r = 0; r < ratio; ++r) acc += kv[(j * ratio + r) * D + c] * (w[r] / sum);
      lat[c] = acc;
    }
  }
}

void append_compressed(const CompressedGroups& g, const float* inv_freq, int rope_dim,
                       CsaSourceState& st, std::vector<float>* prequant) {
  const int64_t D = st.head_dim;
  DSV41_CHECK(g.first_entry == st.n_entries, kInternal,
              "layer {}: compressed groups start at entry {}, cache holds {}", st.layer,
              g.first_entry, st.n_entries);
  DSV41_CHECK(st.cache.n_compressed() == st.n_entries, kInternal,
              "layer {}: compressed cache holds {} entries, the state counts {}", st.layer,
              st.cache.n_compressed(), st.n_entries);
  std::vector<float> e(D);
  for (int64_t k = 0; k < g.n_groups; ++k) {
    std::copy(g.latent.begin() + k * D, g.latent.begin() + (k + 1) * D, e.begin());
    rope_rotate(e.data() + D - rope_dim, inv_freq, rope_dim, (g.first_entry + k) * st.ratio, false);
    if (prequant != nullptr) prequant->insert(prequant->end(), e.begin(), e.end());
    fake_quant_compressed_fp4(e.data(), D);
    st.cache.append_compressed(e.data());  // packed FP4 block 16 + e4m3 (§2.8), exact
  }
  st.n_entries += g.n_groups;
}

}  // namespace dsv41
