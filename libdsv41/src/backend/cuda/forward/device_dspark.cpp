// DSpark on the GPU: Transformer::write_dspark_context and DsparkDrafter::draft_block, op for op.
#include "backend/cuda/forward/device_dspark.hpp"

#include <algorithm>
#include <string>

#include "backend/cuda/forward/launch_check.hpp"
#include "core/check.hpp"
#include "dsv41k/dspark.hpp"
#include "dsv41k/engram.hpp"
#include "dsv41k/launchers.hpp"
#include "dsv41k/mhc.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"

namespace dsv41::cuda {

struct DeviceDspark::Stage {
  DeviceBlockSites sites;
  DeviceAttention attn;
  DeviceMoe ffn;

  uint64_t device_bytes() const {
    return sites.device_bytes() + attn.device_bytes() + ffn.device_bytes();
  }
};

DeviceDspark::~DeviceDspark() = default;

std::unique_ptr<DeviceDspark> DeviceDspark::upload(const Transformer& cpu, int max_chunk,
                                                   void* scratch, size_t scratch_bytes) {
  const DsparkWeights* w = cpu.weights().dspark.get();
  DSV41_CHECK(w != nullptr, kInternal, "CUDA DSpark: the model was loaded without the module");
  const TextConfig& t = cpu.config().text;
  std::unique_ptr<DeviceDspark> d(new DeviceDspark());
  d->block_ = t.dspark_block_size;
  DSV41_CHECK(d->block_ >= 1 && d->block_ <= max_chunk, kUnsupported,
              "config.json: dspark_block_size = {} exceeds CudaForwardOptions.max_chunk = {} (a "
              "draft block is one step of the forward workspace)",
              d->block_, max_chunk);
  // The stages' routing runs in the backbone's MoE workspace (sized by its experts and top-k).
  DSV41_CHECK(t.dspark_n_routed_experts <= t.n_routed_experts &&
                  t.dspark_num_experts_per_tok <= t.num_experts_per_tok,
              kUnsupported,
              "config.json: dspark_n_routed_experts = {} / dspark_num_experts_per_tok = {} exceed "
              "the backbone's n_routed_experts = {} / num_experts_per_tok = {} (the CUDA draft "
              "routes in the backbone's MoE workspace)",
              t.dspark_n_routed_experts, t.dspark_num_experts_per_tok, t.n_routed_experts,
              t.num_experts_per_tok);
  const std::string last = "mtp." + std::to_string(w->stages.size() - 1) + ".";
  DSV41_CHECK(w->markov_embed.format() == WeightFormat::kBF16, kUnsupported,
              "{}markov_head.embed.weight is not BF16: the CUDA draft gathers its rows as BF16",
              last);
  d->taps_ = t.dspark_target_layer_ids;
  d->hc_ = t.hc_mult;
  d->hidden_ = t.hidden_size;
  d->vocab_ = t.vocab_size;
  d->rank_ = w->markov_embed.in_features();
  d->noise_ = t.dspark_noise_token_id;
  d->eps_ = static_cast<float>(t.rms_norm_eps);
  const MoeShape moe = moe_shape(t, t.dspark_n_routed_experts, t.dspark_num_experts_per_tok);
  for (size_t s = 0; s < w->stages.size(); ++s) {
    const DsparkStage& ws = w->stages[s];
    auto st = std::make_unique<Stage>();
    st->sites = DeviceBlockSites::upload(ws.attn_norm, ws.ffn_norm, ws.hc_attn, ws.hc_ffn);
    st->attn = DeviceAttention::upload(ws.attn);
    st->ffn = DeviceMoe::upload(ws.ffn, moe, t.num_hidden_layers + static_cast<int>(s));
    if (scratch != nullptr) {
      st->attn.set_gemv_scratch(scratch, scratch_bytes);
      st->ffn.set_gemv_scratch(scratch, scratch_bytes);
    }
    d->stages_.push_back(std::move(st));
  }
  d->main_proj_ = DeviceLinear::upload(w->main_proj, "mtp.0.main_proj.weight");
  d->markov_embed_ = DeviceLinear::upload(w->markov_embed, last + "markov_head.embed.weight");
  DSV41_CHECK(d->markov_embed_.format() == WeightFormat::kBF16, kInternal,
              "{}markov_head.embed.weight went up as {} bytes, not BF16", last,
              d->markov_embed_.bytes());
  d->markov_head_ = DeviceLinear::upload(w->markov_head, last + "markov_head.head.weight");
  d->main_norm_ = upload_f32(w->main_norm);
  d->norm_ = upload_f32(w->norm);
  d->confidence_ = upload_f32(w->confidence);
  const int64_t K = d->block_, D = d->hidden_;
  d->h_ = DeviceBuffer(static_cast<size_t>(K * D) * 4);
  d->e_ = DeviceBuffer(static_cast<size_t>(d->rank_) * 4);
  d->markov_ = DeviceBuffer(static_cast<size_t>(d->vocab_) * 4);
  d->ids_ = DeviceBuffer(static_cast<size_t>(K + 1) * 4);
  d->conf_ = DeviceBuffer(static_cast<size_t>(K) * 4);
  d->stage_slots_ = std::make_unique<PinnedBuffer>(static_cast<size_t>(K) * 4);
  d->stage_out_ = std::make_unique<PinnedBuffer>(static_cast<size_t>(K) * 8);
  // A decode step's features; a prefill chunk grows them to its last `capacity` rows once.
  (void)d->features(std::min<int64_t>(max_chunk, t.sliding_window));
  return d;
}

uint64_t DeviceDspark::device_bytes() const {
  uint64_t b = main_proj_.bytes() + markov_embed_.bytes() + markov_head_.bytes();
  for (const auto& s : stages_) b += s->device_bytes();
  for (const DeviceBuffer* v :
       {&main_norm_, &norm_, &confidence_, &feat_, &main_x_, &h_, &e_, &markov_, &ids_, &conf_})
    b += v->bytes();
  return b;
}

float* DeviceDspark::features(int64_t rows) {
  if (rows > feat_rows_) {
    const int64_t n_taps = static_cast<int64_t>(taps_.size());
    feat_ = DeviceBuffer(static_cast<size_t>(rows * n_taps * hidden_) * 4);
    main_x_ = DeviceBuffer(static_cast<size_t>(rows * hidden_) * 4);
    feat_rows_ = rows;
  }
  return feat_.as<float>();
}

void DeviceDspark::write_context(int64_t n, int64_t pos, DeviceSequence& seq, ForwardWorkspace& ws,
                                 cudaStream_t s) const {
  DSV41_CHECK(seq.dspark.size() == stages_.size() && n <= feat_rows_, kInternal,
              "CUDA DSpark: context of {} rows for a sequence with {} rings (model {} stages, "
              "features for {} rows)",
              n, seq.dspark.size(), stages_.size(), feat_rows_);
  float* main_x = main_x_.as<float>();
  main_proj_.gemv(feat_.as<float>(), n, main_x, s);
  check_launch(kernels::rms_norm(main_x, main_norm_.as<float>(), main_x, n, hidden_, eps_, s), -1,
               "DSpark main_norm");
  for (size_t i = 0; i < stages_.size(); ++i)
    stages_[i]->attn.context_rows(main_x, n, pos, seq.dspark[i], ws, s);
}

DsparkProposal DeviceDspark::draft(const DeviceSequence& seq, int32_t next,
                                   const DsparkDraftContext& c, bool with_logits) const {
  const int64_t K = block_, D = hidden_, V = vocab_, R = rank_;
  DSV41_CHECK(seq.dspark.size() == stages_.size(), kInternal,
              "CUDA DSpark: the sequence has no DSpark context (made before the module was "
              "loaded?)");
  DSV41_CHECK(next >= 0 && next < V, kInvalidArgument,
              "DSpark: next = {} is outside the vocabulary [0, {})", next, V);
  ForwardWorkspace& ws = *c.ws;
  MhcSites& sites = *c.sites;
  cudaStream_t s = c.stream;
  const int64_t pos0 = seq.pos();
  // Slots: embed(next), then the noise token; every stream starts as the embedding.
  int32_t* slots = stage_slots_->as<int32_t>();
  slots[0] = next;
  std::fill(slots + 1, slots + K, noise_);
  int32_t* ids = ws.ids.as<int32_t>();
  check_launch(cudaMemcpyAsync(ids, slots, K * 4, cudaMemcpyHostToDevice, s), -1,
               "DSpark slot ids upload");
  check_launch(cudaMemcpyAsync(ids_.data(), ids, 4, cudaMemcpyDeviceToDevice, s), -1,
               "DSpark Markov id_0");
  float* H = ws.H.as<float>();
  float* Hmid = ws.Hmid.as<float>();
  float* x = ws.x.as<float>();
  float* xn = ws.xn.as<float>();
  float* y = ws.y.as<float>();
  check_launch(kernels::embed_rows(ids, c.embed, H, K, hc_, D, V, s), -1, "DSpark embed_rows");
  if (c.profile != nullptr) c.profile->mark("start", s);
  const float* pre = ws.pre_init.as<float>();
  float* pre_a = ws.pre_a.as<float>();
  float* post_a = ws.post_a.as<float>();
  float* comb_a = ws.comb_a.as<float>();
  float* pre_f = ws.pre_f.as<float>();
  float* post_f = ws.post_f.as<float>();
  float* comb_f = ws.comb_f.as<float>();
  const kernels::HcExpandIn ffn_out{y, Hmid, post_f, comb_f};
  const kernels::HcExpandIn attn_out{y, H, post_a, comb_a};
  bool pending = false;
  for (size_t i = 0; i < stages_.size(); ++i) {
    const Stage& st = *stages_[i];
    const int layer = static_cast<int>(i);
    sites.site(pending ? &ffn_out : nullptr, H, st.sites.attn_site(), pre, {pre_a, post_a, comb_a},
               xn, K, s, layer, "DSpark hc_site attn");
    st.attn.forward_block(xn, K, pos0, seq.dspark[i], ws, y, s);
    if (c.all_reduce) c.all_reduce(y, K * D, "dspark attention");  // partial sums over heads
    profile_mark(c.profile, "dspark stage mhc+attn", s);
    sites.site(&attn_out, Hmid, st.sites.ffn_site(), pre_a, {pre_f, post_f, comb_f}, xn, K, s,
               layer, "DSpark hc_site ffn");
    st.ffn.forward(xn, K, nullptr, ws, y, s);
    if (c.all_reduce) c.all_reduce(y, K * D, "dspark ffn");  // routed + shared partial sums
    profile_mark(c.profile, "dspark stage mhc+moe", s);
    pending = true;
    pre = pre_f;
  }
  sites.expand(ffn_out, H, K, s, -1, "DSpark hc_expand ffn (last stage)");
  sites.join(s);
  // h_k = collapse(H, pre of the last site); U = head(norm(h)).
  float* h = h_.as<float>();
  check_launch(kernels::hc_collapse(H, pre, h, K, hc_, D, s), -1, "DSpark hc_collapse");
  check_launch(kernels::rms_norm(h, norm_.as<float>(), x, K, D, eps_, s), -1, "DSpark norm");
  float* U = ws.logits.as<float>();
  c.head_logits(x, K);
  profile_mark(c.profile, "dspark collapse+norm+head", s);
  // The Markov chain, serially on the device: id_{k+1} = argmax U_k + M_h · M_e[id_k].
  int32_t* chain = ids_.as<int32_t>();
  float* e = e_.as<float>();
  float* markov = markov_.as<float>();
  const auto* embed_table = reinterpret_cast<const uint16_t*>(markov_embed_.weight());
  for (int k = 0; k < K; ++k) {
    check_launch(kernels::embed_rows(chain + k, embed_table, e, 1, 1, R, V, s), -1,
                 "DSpark Markov embedding");
    markov_head_.gemv(e, 1, markov, s);
    check_launch(
        kernels::dspark_markov_step(U + k * V, markov, h + k * D, e, confidence_.as<float>(), V, D,
                                    R, k, chain, conf_.as<float>(), s),
        -1, "dspark_markov_step");
  }
  profile_mark(c.profile, "dspark markov chain", s);
  uint8_t* out = stage_out_->as<uint8_t>();
  check_launch(cudaMemcpyAsync(out, chain + 1, K * 4, cudaMemcpyDeviceToHost, s), -1,
               "DSpark draft ids download");
  check_launch(cudaMemcpyAsync(out + K * 4, conf_.data(), K * 4, cudaMemcpyDeviceToHost, s), -1,
               "DSpark confidence download");
  check_launch(cudaStreamSynchronize(s), -1, "DSpark draft");
  DsparkProposal p;
  const int32_t* got_ids = reinterpret_cast<const int32_t*>(out);
  const float* got_conf = reinterpret_cast<const float*>(out + K * 4);
  p.tokens.assign(got_ids, got_ids + K);
  p.confidence.assign(got_conf, got_conf + K);
  if (with_logits) {
    p.base_logits.resize(static_cast<size_t>(K * V));
    ws.logits.download(p.base_logits.data(), p.base_logits.size() * 4);
    p.hidden.resize(static_cast<size_t>(K * D));
    h_.download(p.hidden.data(), p.hidden.size() * 4);
  }
  return p;
}

}  // namespace dsv41::cuda
