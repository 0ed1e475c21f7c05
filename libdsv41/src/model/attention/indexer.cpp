// Indexer (§2.4) and candidate blocks (§2.5), as HF `DeepseekV41Indexer` /
// `select_candidate_blocks`.
#include "model/attention/indexer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "config/model_config.hpp"
#include "core/check.hpp"
#include "core/thread_pool.hpp"
#include "model/attention/attention_state.hpp"
#include "model/attention/compressor.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/rms_norm.hpp"

namespace dsv41 {

Indexer Indexer::bind(const Checkpoint& ck, const ModelConfig& cfg, int layer) {
  const TextConfig& t = cfg.text;
  const LayerRole& role = cfg.roles.at(layer);
  Indexer ix;
  ix.layer_ = layer;
  ix.owns_keys_ = role.kv_source;
  ix.n_heads_ = t.index_n_heads;
  ix.head_dim_ = t.index_head_dim;
  ix.ratio_ = t.compress_ratios.at(layer);
  ix.hidden_ = t.hidden_size;
  ix.q_lora_ = t.q_lora_rank;
  ix.latent_dim_ = t.head_dim;
  ix.eps_ = static_cast<float>(t.rms_norm_eps);
  DSV41_CHECK(ix.ratio_ >= 1 && ix.n_heads_ > 0 && ix.head_dim_ > 0, kInvalidArgument,
              "layer {}: an index source needs ratio >= 1 and index_n_heads, index_head_dim > 0 "
              "(got {}, {}, {})",
              layer, ix.ratio_, ix.n_heads_, ix.head_dim_);
  DSV41_CHECK(t.qk_rope_head_dim <= ix.head_dim_, kInvalidArgument,
              "index_head_dim = {} is smaller than qk_rope_head_dim = {}", ix.head_dim_,
              t.qk_rope_head_dim);
  const std::string p = "layers." + std::to_string(layer) + ".attn.indexer.";
  ix.wq_b_ =
      Linear::bind(ck, p + "wq_b", int64_t{ix.n_heads_} * ix.head_dim_, t.q_lora_rank, cfg.quant);
  ix.weights_proj_ = Linear::bind(ck, p + "weights_proj", ix.n_heads_, t.hidden_size, cfg.quant);
  if (ix.owns_keys_) {
    ix.wk_ = Linear::bind(ck, p + "wk", ix.head_dim_, t.head_dim, cfg.quant);
    ix.k_norm_ = load_vector(ck, p + "k_norm.weight", ix.head_dim_);
  }
  return ix;
}

void Indexer::append_keys(const CompressedGroups& g, const float* inv_freq, int rope_dim,
                          CsaSourceState& st, std::vector<float>* prequant) const {
  DSV41_CHECK(owns_keys_, kInternal, "layer {}: append_keys on an indexer without wk", layer_);
  DSV41_CHECK(st.index_head_dim == head_dim_ && g.first_entry == st.cache.n_index(), kInternal,
              "layer {}: index-key cache holds {} keys, groups start at entry {}", layer_,
              st.cache.n_index(), g.first_entry);
  if (g.n_groups == 0) return;
  const int64_t D = head_dim_;
  std::vector<float> k(g.n_groups * D);
  wk_.forward(g.latent.data(), g.n_groups, k.data(), nullptr);
  rms_norm(k.data(), k_norm_.data(), g.n_groups, D, eps_, k.data());
  for (int64_t j = 0; j < g.n_groups; ++j) {
    float* kj = k.data() + j * D;
    rope_rotate(kj + D - rope_dim, inv_freq, rope_dim, (g.first_entry + j) * ratio_, false);
    if (prequant != nullptr) prequant->insert(prequant->end(), kj, kj + D);
    fake_quant_index_fp4(kj, D);
  }
  for (int64_t j = 0; j < g.n_groups; ++j) st.cache.append_index(k.data() + j * D);  // §2.8
}

void Indexer::score(const float* x, const float* qr, int64_t T, int64_t pos0, const float* inv_freq,
                    int rope_dim, const CsaSourceState& keys, float* scores,
                    ThreadPool* pool) const {
  const int64_t H = n_heads_, D = head_dim_, n = keys.n_entries;
  DSV41_CHECK(keys.index_head_dim == head_dim_ && keys.cache.n_index() == n, kInternal,
              "layer {}: index keys of layer {} hold {} keys for {} entries", layer_, keys.layer,
              keys.cache.n_index(), n);
  if (n == 0 || T == 0) return;
  // Per-call fp32 scratch of every key (all are scored): [n, D], unpacked exactly.
  std::vector<float> key_scratch(n * D);
  for (int64_t j = 0; j < n; ++j) keys.cache.read_index(j, key_scratch.data() + j * D);
  std::vector<float> q(T * H * D), w(T * H);
  wq_b_.forward(qr, T, q.data(), pool);
  weights_proj_.forward(x, T, w.data(), pool);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float* qh = q.data() + (t * H + h) * D;
      rope_rotate(qh + D - rope_dim, inv_freq, rope_dim, pos0 + t, false);
      fake_quant_index_fp4(qh, D);  // block 32 within each head (D % 32 == 0 released)
    }
  indexer_score_rows(q.data(), w.data(), key_scratch.data(), nullptr, T, static_cast<int>(H),
                     static_cast<int>(D), n, pos0, ratio_, scores, pool);
}

void indexer_score_rows(const float* q, const float* w_raw, const float* kc, const uint8_t* mask,
                        int64_t T, int H, int D, int64_t n, int64_t pos0, int ratio, float* scores,
                        ThreadPool* pool) {
  const float heads_scale = static_cast<float>(std::pow(static_cast<double>(H), -0.5));
  const float softmax_scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  auto rows = [&](size_t b, size_t e) {
    std::vector<float> w(H);
    for (size_t ti = b; ti < e; ++ti) {
      const int64_t t = static_cast<int64_t>(ti);
      for (int h = 0; h < H; ++h) w[h] = w_raw[t * H + h] * heads_scale;
      const int64_t visible = (pos0 + t + 1) / ratio;  // entries j < visible are complete
      float* s = scores + t * n;
      for (int64_t j = 0; j < n; ++j) {
        if (j >= visible || (mask != nullptr && mask[t * n + j] == 0)) {
          s[j] = -INFINITY;
          continue;
        }
        const float* kj = kc + j * D;
        float acc = 0.0f;
        for (int64_t h = 0; h < H; ++h) {
          const float* qh = q + (t * H + h) * D;
          float dot = 0.0f;
          for (int64_t c = 0; c < D; ++c) dot += qh[c] * kj[c];
          acc += (std::max(dot, 0.0f) * softmax_scale) * w[h];
        }
        s[j] = acc;
      }
    }
  };
  if (pool != nullptr && T > 1) {
    pool->parallel_for(static_cast<size_t>(T), rows);
  } else {
    rows(0, static_cast<size_t>(T));
  }
}

void select_topk(const float* scores, int64_t T, int64_t n, int k, int32_t* out) {
  const int64_t take = std::min<int64_t>(k, n);
  std::vector<int32_t> order(n);
  for (int64_t t = 0; t < T; ++t) {
    const float* s = scores + t * n;
    std::iota(order.begin(), order.end(), 0);
    // Descending score, lower index first on exact ties.
    std::partial_sort(order.begin(), order.begin() + take, order.end(),
                      [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    int32_t* o = out + t * k;
    int kept = 0;
    for (int64_t i = 0; i < take; ++i)
      if (s[order[i]] > -INFINITY) o[kept++] = order[i];  // -inf picks are dropped
    std::sort(o, o + kept);
    std::fill(o + kept, o + k, -1);
  }
}

void select_candidate_blocks(const float* scores, int64_t T, int64_t n, int64_t pos0, int ratio,
                             int topk_blocks, int block_size, uint8_t* mask, float* block_scores) {
  DSV41_CHECK(block_size > 0 && topk_blocks > 0 && ratio > 0, kInvalidArgument,
              "candidate blocks need block_size, topk_blocks, ratio > 0 (got {}, {}, {})",
              block_size, topk_blocks, ratio);
  const int64_t nb = (n + block_size - 1) / block_size;
  const int64_t take = std::min<int64_t>(topk_blocks, nb);
  std::vector<float> bs(nb);
  std::vector<int32_t> order(nb);
  for (int64_t t = 0; t < T; ++t) {
    const float* s = scores + t * n;
    for (int64_t b = 0; b < nb; ++b) {
      float m = -INFINITY;  // padding past n counts as -inf
      for (int64_t j = b * block_size; j < std::min<int64_t>(n, (b + 1) * block_size); ++j)
        m = std::max(m, s[j]);
      bs[b] = m;
    }
    const int64_t n_vis = (pos0 + t + 1) / ratio;
    if (n_vis > 0 && (n_vis - 1) / block_size < nb) bs[(n_vis - 1) / block_size] = INFINITY;
    if (block_scores != nullptr) std::copy(bs.begin(), bs.end(), block_scores + t * nb);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(
        order.begin(), order.begin() + take, order.end(),
        [&bs](int32_t a, int32_t b) { return bs[a] > bs[b] || (bs[a] == bs[b] && a < b); });
    uint8_t* m = mask + t * n;
    std::fill(m, m + n, uint8_t{0});
    for (int64_t i = 0; i < take; ++i) {
      const int64_t b = order[i];
      if (!(bs[b] > -INFINITY)) continue;  // fewer reachable blocks than topk_blocks
      for (int64_t j = b * block_size; j < std::min<int64_t>(n, (b + 1) * block_size); ++j)
        m[j] = 1;
    }
  }
}

}  // namespace dsv41
