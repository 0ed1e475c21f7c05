// Attention sublayer forward (§2.2), compressed branch by role (§2.3-2.6).
#include "model/attention/attention_layer.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/window_sparse_attention.hpp"
#include "model/rms_norm.hpp"

namespace dsv41 {
AttentionLayer AttentionLayer::bind(const Checkpoint& ck, const ModelConfig& cfg, int layer,
                                    const RopeTables& rope, const ShardPlan* plan) {
  DSV41_CHECK(layer >= 0 && layer < static_cast<int>(cfg.roles.size()), kInvalidArgument,
              "attention layer {} is outside the {} configured layers", layer, cfg.roles.size());
  return bind_role(ck, cfg, "layers." + std::to_string(layer) + ".attn.", cfg.roles[layer], rope,
                   plan);
}

AttentionLayer AttentionLayer::bind_named(const Checkpoint& ck, const ModelConfig& cfg,
                                          const std::string& prefix, const LayerRole& role,
                                          const RopeTables& rope, const ShardPlan* plan) {
  DSV41_CHECK(role.ratio == 0 && !role.kv_source && !role.index_source, kInternal,
              "{}: only window-only roles are bound by name", prefix);
  return bind_role(ck, cfg, prefix, role, rope, plan);
}

AttentionLayer AttentionLayer::bind_role(const Checkpoint& ck, const ModelConfig& cfg,
                                         const std::string& p, const LayerRole& role,
                                         const RopeTables& rope, const ShardPlan* plan) {
  const TextConfig& t = cfg.text;
  const int layer = role.layer;
  AttentionLayer a;
  a.role_ = role;
  a.hidden_ = t.hidden_size;
  a.n_heads_ = t.num_attention_heads;
  a.head_dim_ = t.head_dim;
  a.rope_dim_ = t.qk_rope_head_dim;
  a.q_lora_ = t.q_lora_rank;
  a.o_groups_ = t.o_groups;
  a.o_lora_ = t.o_lora_rank;
  a.window_ = t.sliding_window;
  a.index_topk_ = t.index_topk;
  a.cand_blocks_ = t.candidate_topk_blocks;
  a.cand_block_size_ = t.candidate_block_size;
  a.eps_ = static_cast<float>(t.rms_norm_eps);
  DSV41_CHECK(a.o_groups_ > 0 && a.n_heads_ % a.o_groups_ == 0, kInvalidArgument,
              "config.json: num_attention_heads = {} is not a multiple of o_groups = {}",
              a.n_heads_, a.o_groups_);
  DSV41_CHECK(rope.rope_dim == a.rope_dim_ && a.rope_dim_ <= a.head_dim_, kInvalidArgument,
              "RoPE tables have dimension {}, the layer needs qk_rope_head_dim = {} <= head_dim {}",
              rope.rope_dim, a.rope_dim_, a.head_dim_);
  a.inv_freq_ = rope.for_layer(a.role_.compress_rope).data();
  a.inv_freq_compress_ = rope.compress.data();

  const int64_t hd = int64_t{a.n_heads_} * a.head_dim_;
  const ShardPlan whole = ShardPlan::make(t, 0, 1);
  const ShardPlan& sp = plan != nullptr ? *plan : whole;
  a.head0_ = static_cast<int>(sp.heads.begin);
  a.local_heads_ = static_cast<int>(sp.heads.size());
  a.group0_ = static_cast<int>(sp.groups.begin);
  a.local_groups_ = static_cast<int>(sp.groups.size());
  const int64_t D = a.head_dim_, L = a.o_lora_;
  a.wq_a_ = Linear::bind(ck, p + "wq_a", a.q_lora_, a.hidden_, cfg.quant);
  a.q_norm_ = load_vector(ck, p + "q_norm.weight", a.q_lora_);
  // Head h is rows [h·D, (h+1)·D) of wq_b; group g is rows [g·L, (g+1)·L) of wo_a and columns
  // [g·L, (g+1)·L) of wo_b.
  a.wq_b_ = Linear::bind(ck, p + "wq_b", hd, a.q_lora_, cfg.quant)
                .slice(sp.heads.begin * D, sp.heads.end * D, 0, a.q_lora_, p + "wq_b");
  a.wkv_ = Linear::bind(ck, p + "wkv", a.head_dim_, a.hidden_, cfg.quant);
  a.kv_norm_ = load_vector(ck, p + "kv_norm.weight", a.head_dim_);
  a.wo_a_ = Linear::bind(ck, p + "wo_a", int64_t{a.o_groups_} * L, hd / a.o_groups_, cfg.quant)
                .slice(sp.groups.begin * L, sp.groups.end * L, 0, hd / a.o_groups_, p + "wo_a");
  a.wo_b_ = Linear::bind(ck, p + "wo_b", a.hidden_, int64_t{a.o_groups_} * L, cfg.quant)
                .slice(0, a.hidden_, sp.groups.begin * L, sp.groups.end * L, p + "wo_b");
  const std::vector<float> sink = load_vector(ck, p + "attn_sink", a.n_heads_);
  a.sink_.assign(sink.begin() + sp.heads.begin, sink.begin() + sp.heads.end);
  a.has_compressor_ = a.role_.kv_source;
  a.has_indexer_ = a.role_.index_source;
  if (a.has_compressor_) a.compressor_ = Compressor::bind(ck, cfg, layer);
  if (a.has_indexer_) a.indexer_ = Indexer::bind(ck, cfg, layer);
  // HF `uses_candidates`: every index source after the candidate source scores inside its mask.
  a.uses_candidates_ =
      a.has_indexer_ && t.candidate_source_layer_id >= 0 && t.candidate_source_layer_id < layer;
  a.candidate_layer_ = t.candidate_source_layer_id;
  return a;
}

const IndexSelection* AttentionLayer::compressed_branch(const float* x, const float* qr, int64_t T,
                                                        int64_t pos0, AttentionSequenceState& st,
                                                        StepSelections& sel, ThreadPool* pool,
                                                        AttentionTrace* trace) const {
  const int l = role_.layer;
  if (has_compressor_) {
    CsaSourceState& own = st.source.at(l);
    DSV41_CHECK(own.layer == l && own.next_pos() == pos0, kInvalidArgument,
                "layer {}: compressor state expects position {}, the call starts at {}", l,
                own.next_pos(), pos0);
    const CompressedGroups groups = compressor_.run(x, T, own, pool);
    // The indexer keys read the pre-RoPE latents (§2.4), then the latents are rotated into the
    // compressed cache.
    std::vector<float>* kq = trace != nullptr ? &trace->index_keys_prequant : nullptr;
    std::vector<float>* cq = trace != nullptr ? &trace->compressed_prequant : nullptr;
    if (indexer_.owns_keys()) indexer_.append_keys(groups, inv_freq_compress_, rope_dim_, own, kq);
    append_compressed(groups, inv_freq_compress_, rope_dim_, own, cq);
  }
  if (!has_indexer_) {  // Reuse: the selection the governing index source published this call
    auto it = sel.index.find(role_.index_layer);
    DSV41_CHECK(it != sel.index.end() && it->second.T == T, kInvalidArgument,
                "layer {}: no selection of index source {} for this call of {} tokens (run the "
                "layers in order, clear StepSelections per call)",
                l, role_.index_layer, T);
    return &it->second;
  }
  const CsaSourceState& keys = st.source.at(role_.kv_layer);
  DSV41_CHECK(keys.layer == role_.kv_layer, kInternal, "layer {}: KV source {} has no state", l,
              role_.kv_layer);
  const int64_t n = keys.n_entries;
  std::vector<float> scores(T * n);
  indexer_.score(x, qr, T, pos0, inv_freq_compress_, rope_dim_, keys, scores.data(), pool);
  if (role_.candidate_source) {
    CandidateMask& cm = sel.candidates[l];
    cm.T = T;
    cm.n_entries = n;
    cm.mask.assign(T * n, 0);
    const int64_t nb = (n + cand_block_size_ - 1) / cand_block_size_;
    std::vector<float> block_scores(T * nb);
    select_candidate_blocks(scores.data(), T, n, pos0, role_.ratio, cand_blocks_, cand_block_size_,
                            cm.mask.data(), block_scores.data());
    if (trace != nullptr) {
      trace->n_blocks = nb;
      trace->candidate_block_scores = std::move(block_scores);
    }
  } else if (uses_candidates_) {
    auto it = sel.candidates.find(candidate_layer_);
    DSV41_CHECK(it != sel.candidates.end() && it->second.T == T && it->second.n_entries == n,
                kInvalidArgument,
                "layer {}: no candidate mask of layer {} for this call ({} tokens, {} entries)", l,
                candidate_layer_, T, n);
    const std::vector<uint8_t>& m = it->second.mask;
    for (int64_t i = 0; i < T * n; ++i)
      if (m[i] == 0) scores[i] = -INFINITY;
  }
  IndexSelection& out = sel.index[l];
  out.T = T;
  out.topk = index_topk_;
  out.index.assign(T * index_topk_, -1);
  if (n > 0) select_topk(scores.data(), T, n, index_topk_, out.index.data());
  if (trace != nullptr) {
    trace->n_entries = n;
    trace->index_scores = std::move(scores);
  }
  return &out;
}

void AttentionLayer::forward(const float* x, int64_t T, int64_t pos0, AttentionSequenceState& st,
                             StepSelections& sel, float* out, ThreadPool* pool,
                             AttentionTrace* trace) const {
  const int l = role_.layer;
  // H: the query heads this layer holds (all of them unless tensor-parallel); local head h is
  // model head head0_ + h.
  const int64_t H = local_heads_, D = head_dim_, R = rope_dim_, W = window_;
  DSV41_CHECK(l < static_cast<int>(st.window.size()) && l < static_cast<int>(st.source.size()),
              kInvalidArgument, "layer {}: the attention state holds {} layers (init() not run?)",
              l, st.window.size());
  WindowRing& ring = st.window[l];
  DSV41_CHECK(ring.capacity >= W && ring.head_dim == D, kInvalidArgument,
              "layer {}: window ring is {} x {}, the layer needs {} x {} (state not init()ed?)", l,
              ring.capacity, ring.head_dim, W, D);
  DSV41_CHECK(pos0 == ring.next_pos, kInvalidArgument,
              "layer {}: the call starts at position {} but the window holds {} tokens", l, pos0,
              ring.next_pos);
  if (T == 0) return;

  // §2.2 step 1: qr = q_norm(x·Wq_aᵀ) [T, q_lora]; q = qr·Wq_bᵀ [T, H, D], RoPE on the last R.
  std::vector<float> qr(T * q_lora_), q(T * H * D);
  wq_a_.forward(x, T, qr.data(), pool);
  rms_norm(qr.data(), q_norm_.data(), T, q_lora_, eps_, qr.data());
  wq_b_.forward(qr.data(), T, q.data(), pool);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      rope_rotate(q.data() + (t * H + h) * D + D - R, inv_freq_, R, pos0 + t, false);

  // Step 2: window K=V [T, D] = FP8(RoPE(kv_norm(x·Wkvᵀ))).
  std::vector<float> kv(T * D);
  wkv_.forward(x, T, kv.data(), pool);
  rms_norm(kv.data(), kv_norm_.data(), T, D, eps_, kv.data());
  for (int64_t t = 0; t < T; ++t) {
    rope_rotate(kv.data() + t * D + D - R, inv_freq_, R, pos0 + t, false);
    fake_quant_window_fp8(kv.data() + t * D, D);
  }

  // Step 3: compressed entries and the per-query selection.
  const IndexSelection* selection = nullptr;
  const CsaSourceState* csrc = nullptr;
  if (role_.ratio > 0) {
    selection = compressed_branch(x, qr.data(), T, pos0, st, sel, pool, trace);
    csrc = &st.source.at(role_.kv_layer);
    DSV41_CHECK(csrc->layer == role_.kv_layer, kInternal, "layer {}: KV source {} has no state", l,
                role_.kv_layer);
  }

  // Steps 4-6 per (token, head): window keys (t-W, t] ∪ selected entries, scale D^-0.5, sink in
  // the denominator, o = Σ p·v, inverse RoPE at the query position (window_sparse_attention.hpp).
  std::vector<float> o(T * H * D);
  window_sparse_attention(q.data(), kv.data(), T, H, D, static_cast<int>(R), W, pos0, ring,
                          selection, csrc, sink_.data(), inv_freq_, l, o.data(), pool);

  // Step 7: z_g = u_g·Wo_a[g]ᵀ (u_g = heads of group g, [T, H·D/G]); out = [z_0..z_G-1]·Wo_bᵀ.
  // Sharded: g runs over the local groups (wo_a_ / wo_b_ hold only their rows / columns), out is
  // this rank's partial sum.
  const int64_t G = local_groups_, gin = int64_t{n_heads_} * D / o_groups_;
  std::vector<float> u(T * gin), zg(T * o_lora_), z(T * G * o_lora_);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < T; ++t)
      std::copy(o.begin() + t * H * D + g * gin, o.begin() + t * H * D + (g + 1) * gin,
                u.begin() + t * gin);
    wo_a_.forward_rows(u.data(), T, g * o_lora_, (g + 1) * o_lora_, zg.data(), pool);
    for (int64_t t = 0; t < T; ++t)
      std::copy(zg.begin() + t * o_lora_, zg.begin() + (t + 1) * o_lora_,
                z.begin() + t * G * o_lora_ + g * o_lora_);
  }
  wo_b_.forward(z.data(), T, out, pool);

  // The ring keeps the newest capacity = W + max_rollback tokens (a query sees t-W < k <= t; the
  // extra slots let rollback() undo positions), packed FP8 (§2.8).
  for (int64_t t = std::max<int64_t>(0, T - ring.capacity); t < T; ++t)
    ring.write(pos0 + t, kv.data() + t * D);
  ring.next_pos = pos0 + T;
  ring.rollback_depth = std::min<int64_t>(ring.capacity - W, ring.rollback_depth + T);
}

}  // namespace dsv41
