#include "model/model_weights.hpp"

#include <set>

#include "core/check.hpp"

namespace dsv41 {
namespace {

// Groups a released checkpoint carries that the text backbone never reads
// (§1.5, §6, §7).
constexpr const char* kIgnoredPrefixes[] = {"mtp.", "vision.", "aligner.", "image_"};

// Records every tensor name the binder consumes, for the inventory check at the
// end.
class Binder {
 public:
  Binder(const Checkpoint& ck, const ModelConfig& cfg) : ck_(ck), cfg_(cfg) {}

  std::vector<float> f32(const std::string& name, const std::vector<int64_t>& shape) {
    use(name);
    return tensor_to_f32(ck_.expect(name, DType::kF32, shape));
  }
  std::vector<float> vec(const std::string& name, int64_t n) {
    use(name);
    return load_vector(ck_, name, n);
  }
  std::vector<float> mat(const std::string& name, int64_t rows, int64_t cols) {
    use(name);
    return load_matrix(ck_, name, rows, cols);
  }
  // A quantised or plain linear `<prefix>.weight` (+ `.scale` when the format
  // has one).
  Linear linear(const std::string& prefix, int64_t out, int64_t in) {
    Linear l = Linear::bind(ck_, prefix, out, in, cfg_.quant);
    use(prefix + ".weight");
    if (l.format() == WeightFormat::kFp8Block || l.format() == WeightFormat::kFp4Row)
      use(prefix + ".scale");
    return l;
  }
  TensorView view(const std::string& name, DType dt, const std::vector<int64_t>& shape) {
    use(name);
    return ck_.expect(name, dt, shape);
  }
  // Names the attention binder reads (it checks them itself); listed here per
  // role so that the inventory check knows them without depending on the
  // binder's internals.
  void use_attention(const LayerRole& r) {
    use_attention(r, fmt::format("layers.{}.attn.", r.layer));
  }
  void use_attention(const LayerRole& r, const std::string& p) {
    for (const char* w : {"wq_a", "wq_b", "wkv", "wo_a", "wo_b"}) {
      use_if_present(p + w + ".weight");
      use_if_present(p + w + ".scale");
    }
    for (const char* n : {"q_norm.weight", "kv_norm.weight", "attn_sink"}) use_if_present(p + n);
    if (r.kv_source) {
      for (const char* n : {"compressor.wkv.weight", "compressor.norm.weight", "indexer.wk.weight",
                            "indexer.k_norm.weight"})
        use_if_present(p + n);
      if (r.ratio > 1) use_if_present(p + "compressor.wgate.weight");  // §2.3: no gate at ratio 1
    }
    if (r.index_source) {
      for (const char* n :
           {"indexer.wq_b.weight", "indexer.wq_b.scale", "indexer.weights_proj.weight"})
        use_if_present(p + n);
    }
  }

  // `layers.L.ffn.experts.E.` of an expert another provider supplies.
  void skip_prefix(const std::string& prefix) { skipped_.insert(prefix); }

  // dspark_bound: `mtp.*` was bound, so an unused `mtp.*` tensor is an error like any other.
  void check_inventory(std::vector<IgnoredGroup>* ignored, bool dspark_bound) const {
    for (const char* prefix : kIgnoredPrefixes)
      if (!dspark_bound || std::string_view(prefix) != "mtp.") ignored->push_back({prefix, 0, 0});
    IgnoredGroup external{ModelWeights::kExternalExpertsGroup, 0, 0};
    for (const std::string& name : ck_.names()) {
      if (used_.count(name)) continue;
      if (is_skipped(name)) {
        ++external.count;
        external.bytes += ck_.get(name).nbytes();
        continue;
      }
      bool known = false;
      for (IgnoredGroup& g : *ignored) {
        if (name.rfind(g.prefix, 0) == 0) {
          ++g.count;
          g.bytes += ck_.get(name).nbytes();
          known = true;
          break;
        }
      }
      DSV41_CHECK(known, kCorruptFile,
                  "{}: tensor '{}' is not used by the text model (unexpected "
                  "for this config: "
                  "check compress_ratios / *_layer_ids)",
                  *ck_.get(name).file, name);
    }
    if (!skipped_.empty()) ignored->push_back(external);
  }

  void mark(const std::string& name) { use(name); }
  // Another rank's tensor (docs/tp.md): counted as used by the model, not bound here.
  void mark_if_present(const std::string& name) { use_if_present(name); }

 private:
  bool is_skipped(const std::string& name) const {
    // "layers.L.ffn.experts.E.<rest>": the prefix ends at the 5th dot.
    size_t at = 0;
    for (int dots = 0; dots < 5; ++dots) {
      at = name.find('.', at);
      if (at == std::string::npos) return false;
      ++at;
    }
    return skipped_.count(name.substr(0, at)) != 0;
  }
  void use(const std::string& name) { used_.insert(name); }
  void use_if_present(const std::string& name) {
    if (ck_.has(name)) used_.insert(name);
  }

  const Checkpoint& ck_;
  const ModelConfig& cfg_;
  std::set<std::string> used_;
  std::set<std::string> skipped_;
};

engram::EngramWeights bind_engram(Binder& b, const Checkpoint& ck, const TextConfig& t, int layer,
                                  int64_t rows) {
  engram::EngramDims dims;
  dims.hidden = t.hidden_size;
  dims.hc = t.hc_mult;
  dims.head_dim = t.engram_head_dim;
  dims.n_cols = static_cast<int64_t>(t.engram_max_ngram_size - 1) * t.engram_n_heads;
  dims.table_rows = rows;
  const std::string p = fmt::format("layers.{}.engram.", layer);
  for (const char* n :
       {"embed.weight", "embed.scale", "wkv.weight", "wkv.scale", "q_weight", "k_weight"})
    b.mark(p + n);
  return engram::load_engram_weights(ck, layer, dims);
}

// `p` = "layers.L.ffn." (E = n_routed_experts) or "mtp.s.ffn." (E = dspark_n_routed_experts).
// pool > 0 (a synthetic benchmark checkpoint, TextConfig::synthetic_expert_pool): expert e >= pool
// binds expert e % pool's tensors (views of the same mapped bytes).
MoeWeights bind_moe(Binder& b, const TextConfig& t, const std::string& p, int layer, int64_t E,
                    const ShardPlan& sp, const ModelWeights::ExternalExperts& external,
                    int64_t pool) {
  const int64_t D = t.hidden_size, I = t.moe_intermediate_size;
  MoeWeights m;
  m.gate = b.mat(p + "gate.weight", E, D);
  m.bias = b.f32(p + "gate.bias", {E});
  m.bias_vl = b.f32(p + "gate.bias_vl", {E});
  const int64_t IS = I * t.n_shared_experts;
  const ShardRange si = sp.shared_inter;
  const std::string sh = p + "shared_experts.";
  m.shared.w1 = b.linear(sh + "w1", IS, D).slice(si.begin, si.end, 0, D, sh + "w1");
  m.shared.w3 = b.linear(sh + "w3", IS, D).slice(si.begin, si.end, 0, D, sh + "w3");
  m.shared.w2 = b.linear(sh + "w2", D, IS).slice(0, D, si.begin, si.end, sh + "w2");
  m.experts.resize(E);
  m.expert_begin = static_cast<int>(sp.experts.begin);
  m.expert_end = static_cast<int>(sp.experts.end);
  for (int64_t e = 0; e < E; ++e) {
    const std::string ep = fmt::format("{}experts.{}.", p, e);
    if (external && external(layer, static_cast<int>(e))) {
      b.skip_prefix(ep);
      continue;
    }
    if (!sp.experts.contains(e)) {
      for (const char* w : {"w1", "w2", "w3"})
        for (const char* part : {".weight", ".scale"}) b.mark_if_present(ep + w + part);
      continue;
    }
    const std::string src = pool > 0 && e >= pool ? fmt::format("{}experts.{}.", p, e % pool) : ep;
    m.experts[e].w1 = b.linear(src + "w1", I, D);
    m.experts[e].w3 = b.linear(src + "w3", I, D);
    m.experts[e].w2 = b.linear(src + "w2", D, I);
  }
  return m;
}

// `p` = "layers.L." or "mtp.s."; site = "attn" / "ffn".
HcSiteWeights bind_hc(Binder& b, const TextConfig& t, const std::string& block, const char* site) {
  const std::string p = fmt::format("{}hc_{}_", block, site);
  const int64_t mix = (2 + t.hc_mult) * t.hc_mult;
  HcSiteWeights h;
  h.fn = b.f32(p + "fn", {mix, t.hc_mult * t.hidden_size});
  h.base = b.f32(p + "base", {mix});
  h.scale = b.f32(p + "scale", {3});
  return h;
}

// `mtp.{s}.*` (§1.5, §6.1) for s < num_nextn_predict_layers; stage layer ids L + s.
std::unique_ptr<DsparkWeights> bind_dspark(Binder& b, const Checkpoint& ck, const ModelConfig& cfg,
                                           const RopeTables& rope, const ShardPlan& sp) {
  const TextConfig& t = cfg.text;
  const int S = t.num_nextn_predict_layers;
  DSV41_CHECK(S > 0, kUnsupported,
              "DSpark requested but config.json has text_config.num_nextn_predict_layers = 0");
  DSV41_CHECK(!sp.sharded() || t.dspark_n_routed_experts >= sp.world, kInvalidArgument,
              "config.json: dspark_n_routed_experts = {} cannot be split across {} "
              "tensor-parallel ranks",
              t.dspark_n_routed_experts, sp.world);
  const int64_t D = t.hidden_size, V = t.vocab_size, R = t.dspark_markov_rank;
  const int64_t taps = static_cast<int64_t>(t.dspark_target_layer_ids.size());
  DSV41_CHECK(R > 0 && taps > 0 && t.dspark_n_routed_experts > 0 &&
                  t.dspark_num_experts_per_tok > 0 &&
                  t.dspark_num_experts_per_tok <= t.dspark_n_routed_experts,
              kInvalidArgument,
              "config.json: DSpark needs dspark_markov_rank ({}), dspark_target_layer_ids ({} "
              "entries) and 0 < dspark_num_experts_per_tok ({}) <= dspark_n_routed_experts ({})",
              R, taps, t.dspark_num_experts_per_tok, t.dspark_n_routed_experts);
  auto w = std::make_unique<DsparkWeights>();
  w->stages.resize(S);
  for (int s = 0; s < S; ++s) {
    DsparkStage& st = w->stages[s];
    const std::string block = fmt::format("mtp.{}.", s);
    st.attn_norm = b.vec(block + "attn_norm.weight", D);
    st.ffn_norm = b.vec(block + "ffn_norm.weight", D);
    st.hc_attn = bind_hc(b, t, block, "attn");
    st.hc_ffn = bind_hc(b, t, block, "ffn");
    LayerRole role;  // §6.1: window only, ratio 0, main RoPE
    role.layer = t.num_hidden_layers + s;
    st.attn = AttentionLayer::bind_named(ck, cfg, block + "attn.", role, rope, &sp);
    b.use_attention(role, block + "attn.");
    ShardPlan stage_plan = sp;  // the stage's own expert count splits like the backbone's
    stage_plan.experts = sp.dspark_experts;
    // A synthetic benchmark checkpoint's pool aliases the stages' experts too (bench/synthetic).
    const int64_t pool = std::min<int64_t>(t.synthetic_expert_pool, t.dspark_n_routed_experts);
    st.ffn =
        bind_moe(b, t, block + "ffn.", role.layer, t.dspark_n_routed_experts, stage_plan, {}, pool);
  }
  const std::string first = "mtp.0.", last = fmt::format("mtp.{}.", S - 1);
  w->main_proj = b.linear(first + "main_proj", D, taps * D);
  w->main_norm = b.vec(first + "main_norm.weight", D);
  w->norm = b.vec(last + "norm.weight", D);
  w->markov_embed = b.linear(last + "markov_head.embed", V, R);
  w->markov_head = b.linear(last + "markov_head.head", V, R);
  w->confidence = b.mat(last + "confidence_head.proj.weight", 1, D + R);
  return w;
}

}  // namespace

std::unique_ptr<ModelWeights> ModelWeights::bind(const Checkpoint& ck, const ModelConfig& cfg,
                                                 const ShardPlan* plan,
                                                 const ExternalExperts& external, bool dspark) {
  const TextConfig& t = cfg.text;
  DSV41_CHECK(static_cast<int>(cfg.roles.size()) == t.num_hidden_layers, kInternal,
              "ModelWeights::bind needs a validated ModelConfig (roles missing)");
  const int64_t D = t.hidden_size, V = t.vocab_size;
  Binder b(ck, cfg);
  auto w = std::make_unique<ModelWeights>();
  w->plan = plan != nullptr ? *plan : ShardPlan::make(t, 0, 1);
  const ShardPlan& sp = w->plan;
  w->embed = b.view("embed.weight", DType::kBF16, {V, D});
  w->norm = b.vec("norm.weight", D);
  w->head = b.linear("head", V, D).slice(sp.vocab.begin, sp.vocab.end, 0, D, "head");
  w->rope = std::make_unique<RopeTables>(RopeTables::from_config(t));
  w->layers.resize(t.num_hidden_layers);
  size_t engram_index = 0;
  for (int l = 0; l < t.num_hidden_layers; ++l) {
    LayerWeights& lw = w->layers[l];
    const LayerRole& role = cfg.roles[l];
    lw.attn_norm = b.vec(fmt::format("layers.{}.attn_norm.weight", l), D);
    lw.ffn_norm = b.vec(fmt::format("layers.{}.ffn_norm.weight", l), D);
    const std::string block = fmt::format("layers.{}.", l);
    lw.hc_attn = bind_hc(b, t, block, "attn");
    lw.hc_ffn = bind_hc(b, t, block, "ffn");
    lw.attn = AttentionLayer::bind(ck, cfg, l, *w->rope, &sp);
    b.use_attention(role);
    lw.ffn = bind_moe(b, t, block + "ffn.", l, t.n_routed_experts, sp, external,
                      t.synthetic_expert_pool);
    if (role.engram) {
      lw.engram = std::make_unique<engram::EngramWeights>(
          bind_engram(b, ck, t, l, t.engram_num_embeddings[engram_index++]));
    }
  }
  if (dspark) w->dspark = bind_dspark(b, ck, cfg, *w->rope, sp);
  b.check_inventory(&w->ignored, w->dspark != nullptr);
  return w;
}

void ModelWeights::embed_row(int32_t id, float* dst) const {
  const int64_t V = embed.shape()[0], D = embed.shape()[1];
  DSV41_CHECK(id >= 0 && id < V, kInvalidArgument, "token id {} is outside the vocabulary [0, {})",
              id, V);
  const uint8_t* row = embed.data + static_cast<int64_t>(id) * D * 2;
  for (int64_t d = 0; d < D; ++d) {
    const uint16_t bits = static_cast<uint16_t>(row[2 * d] | (row[2 * d + 1] << 8));
    dst[d] = bf16_to_f32(bits);
  }
}

}  // namespace dsv41
