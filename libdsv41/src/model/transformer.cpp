#include "model/transformer.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "engram/token_map.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/dspark/dspark_ops.hpp"
#include "model/exl3_experts.hpp"
#include "model/rms_norm.hpp"
#include "parallel/tp_comm.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dsv41 {
namespace {

[[noreturn]] void rethrow(const Status& s) {
  throw detail::Failure(s.code(), s.message(), __FILE__, __LINE__);
}

// §5.2: the compressed token map and the hash constants, from
// DIR/tokenizer.json. The hasher checks the map size against
// engram_compressed_vocab_size and the prime sums against engram_num_embeddings
// (both name the config key).
std::unique_ptr<engram::NgramHasher> make_hasher(const std::string& dir, const TextConfig& t) {
  const std::string path = dir + "/tokenizer.json";
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(path);
  DSV41_CHECK(static_cast<int64_t>(tok->vocab_size()) <= t.vocab_size, kInvalidArgument,
              "{}: tokenizer has {} ids but text_config.vocab_size is {}", path, tok->vocab_size(),
              t.vocab_size);
  const auto n = static_cast<int32_t>(t.vocab_size);
  engram::TokenMap map = engram::build_token_map(
      n,
      [&](int32_t id) {
        const int32_t one[1] = {id};
        return tok->decode(one);
      },
      [&](int32_t id) { return tok->token_string(id); });
  engram::HashConfig hc;
  hc.layer_ids.assign(t.engram_layer_ids.begin(), t.engram_layer_ids.end());
  hc.num_embeddings = t.engram_num_embeddings;
  hc.vocab_size = t.engram_vocab_size;
  hc.max_ngram_size = t.engram_max_ngram_size;
  hc.n_heads = t.engram_n_heads;
  hc.pad_token_id = t.engram_pad_token_id;
  hc.compressed_vocab_size = t.engram_compressed_vocab_size;
  try {
    return std::make_unique<engram::NgramHasher>(hc, std::move(map));
  } catch (const detail::Failure& f) {  // name the two files whose contents disagree
    throw detail::Failure(f.code(), fmt::format("{}/config.json vs {}: {}", dir, path, f.message()),
                          f.file(), f.line());
  }
}

}  // namespace

std::unique_ptr<Transformer> Transformer::load(const std::string& dir, size_t threads,
                                               parallel::TpComm* comm, const std::string& exl3_plan,
                                               bool dspark) {
  std::unique_ptr<Transformer> m(new Transformer());
  Result<ModelConfig> cfg = ModelConfig::load(dir);
  if (!cfg) rethrow(cfg.status());
  m->cfg_ = std::move(cfg.value());
  const TextConfig& t = m->cfg_.text;
  m->ck_ = Checkpoint::open(dir);
  const ShardPlan plan =
      comm != nullptr ? ShardPlan::make(t, comm->rank(), comm->world()) : ShardPlan::make(t, 0, 1);
  if (plan.sharded()) m->comm_ = comm;
  m->bank_ = open_expert_bank(dir, m->cfg_, exl3_plan);
  ModelWeights::ExternalExperts external;
  if (m->bank_) {
    const exl3::ExpertBank* bank = m->bank_.get();
    external = [bank](int layer, int expert) { return bank->find(layer, expert) != nullptr; };
  }
  m->w_ = ModelWeights::bind(*m->ck_, m->cfg_, &plan, external, dspark);
  if (!t.engram_layer_ids.empty()) m->hasher_ = make_hasher(dir, t);
  m->engram_slot_.assign(t.num_hidden_layers, -1);
  for (size_t i = 0; i < t.engram_layer_ids.size(); ++i)
    m->engram_slot_[t.engram_layer_ids[i]] = static_cast<int>(i);
  m->pool_ = std::make_unique<ThreadPool>(threads);
  m->shape_.hc = t.hc_mult;
  m->shape_.dim = t.hidden_size;
  m->shape_.sinkhorn_iters = t.hc_sinkhorn_iters;
  m->shape_.hc_eps = static_cast<float>(t.hc_eps);
  m->shape_.norm_eps = static_cast<float>(t.rms_norm_eps);
  m->moe_ = moe_shape(t, t.n_routed_experts, t.num_experts_per_tok);
  if (m->bank_) {  // EXL3 experts from the banks, the others from the release FP4 tensors
    m->store_ = std::make_unique<exl3::ExpertStore>(
        m->bank_.get(), m->ck_.get(), exl3::ExpertDims{t.hidden_size, t.moe_intermediate_size});
    // The store reads native experts as the release FP4 only: check them now, not at first use.
    for (int l = 0; l < t.num_hidden_layers; ++l)
      for (int e = 0; e < t.n_routed_experts; ++e)
        if (!m->bank_->find(l, e))
          for (exl3::ExpertProj p :
               {exl3::ExpertProj::kGate, exl3::ExpertProj::kUp, exl3::ExpertProj::kDown})
            m->store_->shape(l, e, p);
    m->default_experts_ = std::make_unique<ProjectionExperts>(*m->store_, m->moe_.swiglu_limit);
  } else {
    std::vector<const MoeWeights*> moe_layers;
    for (const LayerWeights& lw : m->w_->layers) moe_layers.push_back(&lw.ffn);
    m->default_experts_ =
        std::make_unique<CheckpointExperts>(std::move(moe_layers), m->moe_.swiglu_limit);
  }
  m->experts_ = m->default_experts_.get();
  return m;
}

SequenceState Transformer::new_sequence(StateOptions opts) const {
  SequenceState st;
  const int64_t ring = cfg_.text.sliding_window + opts.max_rollback;
  st.init(cfg_, std::move(opts));
  if (w_->dspark) {
    st.dspark.init(static_cast<int>(w_->dspark->stages.size()), ring, cfg_.text.head_dim);
  }
  return st;
}

void Transformer::write_dspark_context(SequenceState& st, const float* feat, int64_t T, int64_t t0,
                                       int64_t pos0) const {
  const DsparkWeights& d = *w_->dspark;
  const int64_t D = shape_.dim, n = T - t0;
  std::vector<float> main_x(n * D);
  d.main_proj.forward(feat, n, main_x.data(), pool_.get());
  rms_norm(main_x.data(), d.main_norm.data(), n, D, shape_.norm_eps, main_x.data());
  DsparkContext& ctx = st.dspark;
  const int64_t HD = ctx.head_dim;
  std::vector<float> kv(n * HD);
  for (size_t s = 0; s < d.stages.size(); ++s) {
    const AttentionLayer& a = d.stages[s].attn;
    const int R = a.rope_dim();
    a.wkv().forward(main_x.data(), n, kv.data(), pool_.get());
    rms_norm(kv.data(), a.kv_norm().data(), n, HD, a.eps(), kv.data());
    for (int64_t i = 0; i < n; ++i) {
      float* row = kv.data() + i * HD;
      rope_rotate(row + HD - R, a.inv_freq(), R, pos0 + t0 + i, false);
      fake_quant_window_fp8(row, HD);
      std::copy_n(row, HD, ctx.row(static_cast<int>(s), pos0 + t0 + i));
    }
  }
  for (int64_t i = 0; i < n; ++i) ctx.slot_pos[(pos0 + t0 + i) % ctx.capacity] = pos0 + t0 + i;
}

std::vector<int64_t> Transformer::engram_ids(const SequenceState& st, int64_t t0,
                                             int64_t t1) const {
  if (!hasher_) return {};
  return hasher_->ids_for(st.tokens, st.image_flags, t0, t1);
}

void Transformer::engram(int layer, int64_t T, float* H, const int64_t* hash_ids,
                         const uint8_t* image_flags) const {
  const engram::EngramWeights& e = *w_->layers[layer].engram;
  DSV41_CHECK(hash_ids != nullptr, kInternal, "Engram layer {} run without hash ids", layer);
  const int64_t n = T * shape_.hc * shape_.dim;
  engram::apply_engram(
      e, std::span<float>(H, n), std::span<const int64_t>(hash_ids, T * e.dims.n_cols),
      image_flags ? std::span<const uint8_t>(image_flags, T) : std::span<const uint8_t>(), T,
      shape_.norm_eps, pool_.get());
}

void Transformer::all_reduce(float* y, int64_t n, int layer, const char* site) const {
  if (comm_ == nullptr) return;
  const Status s = comm_->all_reduce_sum_f32(std::span<float>(y, static_cast<size_t>(n)));
  if (!s.is_ok()) {
    throw detail::Failure(s.code(),
                          fmt::format("layer {} {} all-reduce: {}", layer, site, s.message()),
                          __FILE__, __LINE__);
  }
}

void Transformer::run_layer(int layer, int64_t T, int64_t pos0, float* H, std::vector<float>& pre,
                            const int64_t* hash_ids, const uint8_t* image_flags, SequenceState& st,
                            StepSelections& sel, LayerTrace* trace, const DsparkTap* tap) const {
  const LayerWeights& lw = w_->layers[layer];
  const int64_t D = shape_.dim, HD = shape_.hc * D;
  const float eps = shape_.norm_eps;
  ThreadPool* pool = pool_.get();
  if (lw.engram) {  // §3: before the attention site, on all hc streams
    engram(layer, T, H, hash_ids, image_flags);
    if (trace) trace->engram_out.assign(H, H + T * HD);
  }
  if (tap != nullptr && tap->t0 < T)
    hc_stream_mean(H + tap->t0 * HD, T - tap->t0, shape_.hc, D, tap->feat + tap->k * D,
                   tap->n_taps * D);
  std::vector<float> x(T * D), xn(T * D), y(T * D), Hmid(T * HD);
  // Attention site: mixes from the entering H; the collapse uses the previous
  // site's pre.
  HcMixes a = hc_mixes(lw.hc_attn, shape_, H, T, pool);
  hc_collapse(H, pre.data(), shape_, T, x.data());
  rms_norm(x.data(), lw.attn_norm.data(), T, D, eps, xn.data());
  lw.attn.forward(xn.data(), T, pos0, st.attn, sel, y.data(), pool,
                  trace ? &trace->attention : nullptr);
  all_reduce(y.data(), T * D, layer, "attention");  // partial sums over the ranks' heads
  hc_expand(y.data(), H, a, shape_, T, Hmid.data());
  if (trace) {
    trace->attn_collapsed = x;
    trace->attn_normed = xn;
    trace->attn_out = y;
  }
  // FFN site: collapse with the attention site's pre.
  HcMixes f = hc_mixes(lw.hc_ffn, shape_, Hmid.data(), T, pool);
  hc_collapse(Hmid.data(), a.pre.data(), shape_, T, x.data());
  rms_norm(x.data(), lw.ffn_norm.data(), T, D, eps, xn.data());
  moe_forward(lw.ffn, moe_, layer, xn.data(), T, image_flags, *experts_, pool, y.data(),
              trace ? &trace->routing : nullptr);
  all_reduce(y.data(), T * D, layer, "ffn");  // routed + shared partial sums over the ranks
  hc_expand(y.data(), Hmid.data(), f, shape_, T, H);
  if (trace) {
    trace->ffn_collapsed = x;
    trace->ffn_normed = xn;
    trace->ffn_out = y;
    trace->mix_attn = std::move(a);
  }
  pre = f.pre;
  if (trace) trace->mix_ffn = std::move(f);
}

std::vector<float> Transformer::head(const float* H, const std::vector<float>& pre,
                                     int64_t T) const {
  const int64_t D = shape_.dim;
  std::vector<float> x(T * D);
  hc_collapse(H, pre.data(), shape_, T, x.data());
  rms_norm(x.data(), w_->norm.data(), T, D, shape_.norm_eps, x.data());
  return head_logits(x.data(), T);
}

std::vector<float> Transformer::head_logits(const float* x, int64_t T) const {
  const int64_t V = cfg_.text.vocab_size;
  std::vector<float> logits(T * V);
  if (comm_ == nullptr) {
    w_->head.forward(x, T, logits.data(), pool_.get());
    return logits;
  }
  // Vocabulary shards: rank r computes logits [T, vocab_r] of its head rows, padded to
  // vocab_per_rank columns; the all-gather stacks the ranks' [T, Vp] blocks in rank order.
  const ShardPlan& sp = w_->plan;
  const int64_t Vp = sp.vocab_per_rank, Vl = sp.vocab.size();
  std::vector<float> mine(T * Vp, 0.0f), local(T * Vl), all(sp.world * T * Vp);
  w_->head.forward(x, T, local.data(), pool_.get());
  for (int64_t t = 0; t < T; ++t) std::copy_n(&local[t * Vl], Vl, &mine[t * Vp]);
  const Status s = comm_->all_gather(std::as_bytes(std::span<const float>(mine)),
                                     std::as_writable_bytes(std::span<float>(all)));
  if (!s.is_ok()) {
    throw detail::Failure(s.code(), fmt::format("head all-gather: {}", s.message()), __FILE__,
                          __LINE__);
  }
  for (int q = 0; q < sp.world; ++q) {
    const ShardRange vr = ShardPlan::split(V, q, sp.world);
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(&all[(q * T + t) * Vp], vr.size(), &logits[t * V + vr.begin]);
  }
  return logits;
}

void check_image_inputs(std::span<const uint8_t> image_flags, std::span<const float> image_embeds,
                        int64_t T, int64_t D) {
  DSV41_CHECK(image_flags.empty() || static_cast<int64_t>(image_flags.size()) == T,
              kInvalidArgument, "forward: {} image flags for {} tokens", image_flags.size(), T);
  const int64_t flagged =
      std::count_if(image_flags.begin(), image_flags.end(), [](uint8_t f) { return f != 0; });
  DSV41_CHECK(image_embeds.empty() || static_cast<int64_t>(image_embeds.size()) == flagged * D,
              kInvalidArgument,
              "forward: {} image embedding values for {} image positions of width {} (expected {})",
              image_embeds.size(), flagged, D, flagged * D);
}

std::vector<float> Transformer::forward(SequenceState& st, std::span<const int32_t> ids,
                                        std::span<const uint8_t> image_flags,
                                        std::span<const float> image_embeds) const {
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t D = shape_.dim, hc = shape_.hc;
  DSV41_CHECK(T > 0, kInvalidArgument, "forward: no tokens");
  DSV41_CHECK(st.pos + T <= cfg_.text.max_position_embeddings, kContextOverflow,
              "forward: positions up to {} exceed max_position_embeddings {}", st.pos + T,
              cfg_.text.max_position_embeddings);
  check_image_inputs(image_flags, image_embeds, T, D);
  const int64_t pos0 = st.pos;
  st.attn.reserve_positions(pos0 + T);  // pool pages first: an error leaves the state unchanged
  // §3: every stream starts as the token embedding.
  std::vector<float> H(T * hc * D);
  const float* image_row = image_embeds.empty() ? nullptr : image_embeds.data();
  for (int64_t t = 0; t < T; ++t) {
    float* h = H.data() + t * hc * D;
    if (image_row && image_flags[t]) {
      std::copy_n(image_row, D, h);
      image_row += D;
    } else {
      w_->embed_row(ids[t], h);
    }
    for (int64_t k = 1; k < hc; ++k) std::copy_n(h, D, h + k * D);
  }
  st.tokens.insert(st.tokens.end(), ids.begin(), ids.end());
  if (image_flags.empty()) {
    st.image_flags.resize(st.tokens.size(), 0);
  } else {
    st.image_flags.insert(st.image_flags.end(), image_flags.begin(), image_flags.end());
  }
  const std::vector<int64_t> hash = engram_ids(st, pos0, pos0 + T);  // [n_engram, T, cols]
  const int64_t cols = hasher_ ? hasher_->n_cols() : 0;
  const uint8_t* flags = image_flags.empty() ? nullptr : image_flags.data();
  std::vector<float> pre = hc_initial_pre(shape_, T);
  StepSelections sel;
  // §6.2 DSpark target features: the residual entering each tap layer, mean over the hc
  // streams, for the rows whose context entries can still be read (the last `capacity`).
  const std::vector<int>& taps = cfg_.text.dspark_target_layer_ids;
  const bool dspark = w_->dspark != nullptr && st.dspark.enabled();
  const int64_t t0 = dspark ? std::max<int64_t>(0, T - st.dspark.capacity) : T;
  std::vector<float> feat((T - t0) * static_cast<int64_t>(taps.size()) * D);
  for (int l = 0; l < cfg_.text.num_hidden_layers; ++l) {
    const int slot = engram_slot_[l];
    const int64_t* ids_l = slot >= 0 ? hash.data() + slot * T * cols : nullptr;
    const auto k = std::find(taps.begin(), taps.end(), l) - taps.begin();
    const DsparkTap tap{feat.data(), static_cast<int64_t>(taps.size()), k, t0};
    const bool tapped = dspark && k < static_cast<int64_t>(taps.size());
    run_layer(l, T, pos0, H.data(), pre, ids_l, flags, st, sel, nullptr, tapped ? &tap : nullptr);
  }
  if (dspark) write_dspark_context(st, feat.data(), T, t0, pos0);
  st.pos += T;
  return head(H.data(), pre, T);
}

}  // namespace dsv41
