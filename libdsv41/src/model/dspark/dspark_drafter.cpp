#include "model/dspark/dspark_drafter.hpp"

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/dspark/dspark_ops.hpp"
#include "model/rms_norm.hpp"
#include "model/transformer.hpp"

namespace dsv41 {

DsparkDrafter::DsparkDrafter(const Transformer& t) : t_(t) {
  const DsparkWeights* d = t.weights().dspark.get();
  DSV41_CHECK(d != nullptr, kUnsupported,
              "the model was loaded without the DSpark module (ModelParams.dspark)");
  const TextConfig& c = t.config().text;
  block_ = c.dspark_block_size;
  DSV41_CHECK(block_ >= 1, kInvalidArgument, "config.json: dspark_block_size = {} must be >= 1",
              block_);
  moe_ = moe_shape(c, c.dspark_n_routed_experts, c.dspark_num_experts_per_tok);
  std::vector<const MoeWeights*> stages;
  for (const DsparkStage& s : d->stages) stages.push_back(&s.ffn);
  experts_ = std::make_unique<CheckpointExperts>(std::move(stages), moe_.swiglu_limit);
}

DsparkDrafter::~DsparkDrafter() = default;

// Queries of the block against [context rows of positions max(0, pos0-W) .. pos0-1] ++ [the
// block's own K rows], one softmax with the sink, inverse RoPE at the query position; then the
// grouped output projection (§2.2 step 7).
void DsparkDrafter::block_attention(const DsparkStage& stage, int s, const float* xn, int64_t pos0,
                                    const SequenceState& st, float* out) const {
  const AttentionLayer& a = stage.attn;
  const int64_t K = block_, H = a.local_heads(), D = a.head_dim(), R = a.rope_dim();
  const int64_t W = a.window(), QL = a.q_lora();
  ThreadPool* pool = &t_.pool();
  std::vector<float> qr(K * QL), q(K * H * D), kv(K * D);
  a.wq_a().forward(xn, K, qr.data(), pool);
  rms_norm(qr.data(), a.q_norm().data(), K, QL, a.eps(), qr.data());
  a.wq_b().forward(qr.data(), K, q.data(), pool);
  a.wkv().forward(xn, K, kv.data(), pool);
  rms_norm(kv.data(), a.kv_norm().data(), K, D, a.eps(), kv.data());
  for (int64_t t = 0; t < K; ++t) {
    for (int64_t h = 0; h < H; ++h)
      rope_rotate(q.data() + (t * H + h) * D + D - R, a.inv_freq(), static_cast<int>(R), pos0 + t,
                  false);
    rope_rotate(kv.data() + t * D + D - R, a.inv_freq(), static_cast<int>(R), pos0 + t, false);
    fake_quant_window_fp8(kv.data() + t * D, D);
  }
  // Keys: the context window, then the block.
  const int64_t first = std::max<int64_t>(0, pos0 - W), n_ctx = pos0 - first;
  std::vector<const float*> keys;
  keys.reserve(n_ctx);
  for (int64_t p = first; p < pos0; ++p) {
    DSV41_CHECK(st.dspark.holds(p), kInternal,
                "DSpark context of position {} is missing (the sequence was not filled by a "
                "DSpark-enabled forward)",
                p);
    keys.push_back(st.dspark.row(s, p));
  }
  std::vector<float> o(K * H * D);
  dspark_attend(q.data(), keys.data(), n_ctx, kv.data(), a.sink().data(), a.inv_freq(), K, H, D,
                static_cast<int>(R), pos0, o.data());
  // Grouped low-rank output projection, as AttentionLayer::forward step 7 (over this rank's
  // groups: H / G heads per group).
  const int64_t G = a.local_groups(), L = a.o_lora(), gin = H / G * D;
  std::vector<float> u(K * gin), zg(K * L), z(K * G * L);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < K; ++t)
      std::copy_n(o.data() + t * H * D + g * gin, gin, u.data() + t * gin);
    a.wo_a().forward_rows(u.data(), K, g * L, (g + 1) * L, zg.data(), pool);
    for (int64_t t = 0; t < K; ++t) std::copy_n(zg.data() + t * L, L, z.data() + (t * G + g) * L);
  }
  a.wo_b().forward(z.data(), K, out, pool);
}

DsparkProposal DsparkDrafter::draft(const SequenceState& st, int32_t next) const {
  const int32_t noise = t_.config().text.dspark_noise_token_id;
  std::vector<int32_t> slots(block_, noise);
  slots[0] = next;
  return draft_block(st, slots);
}

DsparkProposal DsparkDrafter::draft_block(const SequenceState& st,
                                          std::span<const int32_t> slots) const {
  const DsparkWeights& d = *t_.weights().dspark;
  const TextConfig& c = t_.config().text;
  const HcShape& hs = t_.hc_shape();
  const int64_t K = block_, D = hs.dim, hc = hs.hc, V = c.vocab_size;
  const int64_t R = d.markov_embed.in_features();
  DSV41_CHECK(static_cast<int64_t>(slots.size()) == K, kInvalidArgument,
              "DSpark: {} slot tokens for a block of {}", slots.size(), K);
  for (size_t k = 0; k < slots.size(); ++k)
    DSV41_CHECK(slots[k] >= 0 && slots[k] < V, kInvalidArgument,
                "DSpark: {} = {} is outside the vocabulary [0, {})",
                k == 0 ? std::string("next") : fmt::format("slot {}", k), slots[k], V);
  const int32_t next = slots[0];
  DSV41_CHECK(st.dspark.enabled(), kInternal, "DSpark: the sequence has no DSpark context");
  ThreadPool* pool = &t_.pool();
  const int64_t pos0 = st.pos;
  // Slots: embed(next), then the noise token; every stream starts as the embedding.
  std::vector<float> H(K * hc * D), Hmid(K * hc * D), x(K * D), xn(K * D), y(K * D);
  for (int64_t t = 0; t < K; ++t) {
    float* h = H.data() + t * hc * D;
    t_.weights().embed_row(slots[t], h);
    for (int64_t j = 1; j < hc; ++j) std::copy_n(h, D, h + j * D);
  }
  std::vector<float> pre = hc_initial_pre(hs, K);
  for (size_t s = 0; s < d.stages.size(); ++s) {
    const DsparkStage& stage = d.stages[s];
    HcMixes a = hc_mixes(stage.hc_attn, hs, H.data(), K, pool);
    hc_collapse(H.data(), pre.data(), hs, K, x.data());
    rms_norm(x.data(), stage.attn_norm.data(), K, D, hs.norm_eps, xn.data());
    block_attention(stage, static_cast<int>(s), xn.data(), pos0, st, y.data());
    const int layer = c.num_hidden_layers + static_cast<int>(s);
    t_.all_reduce(y.data(), K * D, layer, "dspark attention");  // partial sums over heads
    hc_expand(y.data(), H.data(), a, hs, K, Hmid.data());
    HcMixes f = hc_mixes(stage.hc_ffn, hs, Hmid.data(), K, pool);
    hc_collapse(Hmid.data(), a.pre.data(), hs, K, x.data());
    rms_norm(x.data(), stage.ffn_norm.data(), K, D, hs.norm_eps, xn.data());
    moe_forward(stage.ffn, moe_, static_cast<int>(s), xn.data(), K, nullptr, *experts_, pool,
                y.data(), nullptr);
    t_.all_reduce(y.data(), K * D, layer, "dspark ffn");  // routed + shared partial sums
    hc_expand(y.data(), Hmid.data(), f, hs, K, H.data());
    pre = f.pre;
  }
  DsparkProposal out;
  out.hidden.resize(K * D);
  hc_collapse(H.data(), pre.data(), hs, K, out.hidden.data());
  rms_norm(out.hidden.data(), d.norm.data(), K, D, hs.norm_eps, xn.data());
  out.base_logits = t_.head_logits(xn.data(), K);  // the whole vocabulary on every rank
  // Markov chain and confidence, serially over the slots.
  std::vector<float> e(R), markov(V);
  int32_t id = next;
  for (int64_t k = 0; k < K; ++k) {
    d.markov_embed.dequantize_row(id, e.data());
    d.markov_head.forward(e.data(), 1, markov.data(), pool);
    const int32_t best = dspark_markov_pick(out.base_logits.data() + k * V, markov.data(), V);
    out.confidence.push_back(
        dspark_confidence(d.confidence.data(), out.hidden.data() + k * D, D, e.data(), R));
    out.tokens.push_back(best);
    id = best;
  }
  return out;
}

}  // namespace dsv41
