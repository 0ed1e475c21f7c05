// SyntheticGeometry presets, the tensor list (names / dtypes / shapes of the released checkpoint,
// spec model-architecture.md §1.5; the binders in libdsv41/src/model/ read exactly these) and
// config.json.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "synthetic/synthetic_checkpoint.hpp"

namespace dsv41::synth {

uint64_t SyntheticTensor::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

SyntheticGeometry SyntheticGeometry::released(int layers, int experts) {
  DSV41_CHECK(layers >= 1 && experts >= 1, kInvalidArgument,
              "released geometry needs layers >= 1 and experts >= 1 (got {}, {})", layers, experts);
  SyntheticGeometry g;
  g.vocab_size = 129280;
  g.hidden_size = 5120;
  g.num_hidden_layers = layers;
  g.num_attention_heads = 64;
  g.head_dim = 512;
  g.qk_rope_head_dim = 64;
  g.q_lora_rank = 1280;
  g.o_groups = 8;
  g.o_lora_rank = 1024;
  g.sliding_window = 128;
  g.candidate_topk_blocks = 2048;
  g.candidate_block_size = 8;
  g.index_n_heads = 32;
  g.index_head_dim = 128;
  g.index_topk = 512;
  g.moe_intermediate_size = 2304;
  g.n_routed_experts = experts;
  g.n_shared_experts = 1;
  g.num_experts_per_tok = std::min(6, experts);
  g.compress_ratios.assign(layers, 0);
  if (layers > 2) {
    const int n2 = layers == 40 ? 18 : (layers - 2) / 2;
    const int r1 = 2 + n2;  // first ratio-1 layer
    for (int l = 2; l < layers; ++l) g.compress_ratios[l] = l < r1 ? 2 : 1;
    for (int l = 2; l < r1; l += 6) g.kv_source_layer_ids.push_back(l);
    g.index_source_layer_ids = g.kv_source_layer_ids;
    if (r1 < layers) {
      g.kv_source_layer_ids.push_back(r1);
      g.candidate_source_layer_id = r1;
      for (int l = r1; l < layers; l += 4) g.index_source_layer_ids.push_back(l);
    }
  }
  return g;
}

SyntheticGeometry::Vision SyntheticGeometry::Vision::released() {
  return Vision{1024, 2816, 32, 16, 14, 3, 1024, 295936};
}

SyntheticGeometry::Vision SyntheticGeometry::Vision::tiny() {
  return Vision{32, 24, 2, 2, 2, 3, 40, 36};
}

SyntheticGeometry SyntheticGeometry::tiny() {
  SyntheticGeometry g;
  g.vocab_size = 600;
  g.hidden_size = 64;
  g.num_hidden_layers = 8;
  g.num_attention_heads = 2;
  g.head_dim = 64;
  g.qk_rope_head_dim = 32;
  g.q_lora_rank = 64;
  g.o_groups = 2;
  g.o_lora_rank = 32;
  g.sliding_window = 6;
  g.compress_ratios = {0, 2, 2, 2, 1, 1, 1, 1};
  g.kv_source_layer_ids = {1, 4};
  g.index_source_layer_ids = {1, 4, 6};
  g.candidate_source_layer_id = 4;
  g.candidate_topk_blocks = 2;
  g.candidate_block_size = 3;
  g.index_n_heads = 4;
  g.index_head_dim = 64;
  g.index_topk = 3;
  g.moe_intermediate_size = 64;
  g.n_routed_experts = 4;
  g.num_experts_per_tok = 2;
  g.shard_bytes = 256 << 10;  // ~3 shards: the index and the shard split get exercised
  return g;
}

namespace {

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

class ListBuilder {
 public:
  explicit ListBuilder(std::vector<SyntheticTensor>* out) : out_(out) {}

  void add(std::string name, DType dt, std::vector<int64_t> shape, Fill fill, double value,
           double sigma) {
    out_->push_back({std::move(name), dt, std::move(shape), fill, value, sigma});
  }
  // RMSNorm weight: BF16 ones.
  void norm(const std::string& name, int64_t n) {
    add(name, DType::kBF16, {n}, Fill::kConst, 1.0, 0.0);
  }
  void bf16(const std::string& name, int64_t out, int64_t in) {
    add(name, DType::kBF16, {out, in}, Fill::kNormal, 0.0, 1.0 / std::sqrt(double(in)));
  }
  // FP8 e4m3 [out, in] + E8M0 [ceil(out/32), ceil(in/32)]. One scale byte 127 + k for the whole
  // tensor, k = floor(log2(t / 8)) for the row RMS t = 1/sqrt(in), so the codes carry RMS
  // t / 2^k in [8, 16): above the subnormals (2^-6), 4.1 sigma <= 66 far below 448.
  void fp8(const std::string& prefix, int64_t out, int64_t in) {
    const double t = 1.0 / std::sqrt(double(in));
    const int k = static_cast<int>(std::floor(std::log2(t / 8.0)));
    add(prefix + ".weight", DType::kF8E4M3, {out, in}, Fill::kE4m3Code, 0.0, t / std::ldexp(1, k));
    add(prefix + ".scale", DType::kF8E8M0, {(out + 31) / 32, (in + 31) / 32}, Fill::kConst, 127 + k,
        0.0);
  }
  // FP4 I8 [out, in/2] + E8M0 [out, in/32]; code RMS t / 2^k in [1, 2) (e2m1 max 6 = 3-6 sigma).
  void fp4(const std::string& prefix, int64_t out, int64_t in) {
    DSV41_CHECK(in % 32 == 0, kInvalidArgument, "{}: FP4 needs in = {} divisible by 32", prefix,
                in);
    const double t = 1.0 / std::sqrt(double(in));
    const int k = static_cast<int>(std::floor(std::log2(t)));
    add(prefix + ".weight", DType::kI8, {out, in / 2}, Fill::kE2m1Pair, 0.0, t / std::ldexp(1, k));
    add(prefix + ".scale", DType::kF8E8M0, {out, in / 32}, Fill::kConst, 127 + k, 0.0);
  }
  // One Engram layer (spec §5, model/model_weights.cpp bind_engram): the table [rows, head_dim]
  // FP8 with one E8M0 per row per 32 channels (row RMS 1/sqrt(head_dim), like the matrices),
  // wkv [(hc + 1) D, n-gram orders x heads x head_dim] FP8, q/k_weight [hc, D] BF16.
  void engram(const SyntheticGeometry& g, const std::string& p, int64_t rows) {
    const SyntheticGeometry::Engram& e = g.engram;
    const double t = 1.0 / std::sqrt(double(e.head_dim));
    const int k = static_cast<int>(std::floor(std::log2(t / 8.0)));
    add(p + "embed.weight", DType::kF8E4M3, {rows, e.head_dim}, Fill::kE4m3Code, 0.0,
        t / std::ldexp(1, k));
    add(p + "embed.scale", DType::kF8E8M0, {rows, e.head_dim / 32}, Fill::kConst, 127 + k, 0.0);
    const int64_t cols = int64_t{e.max_ngram_size - 1} * e.n_heads * e.head_dim;
    fp8(p + "wkv", (g.hc_mult + 1) * g.hidden_size, cols);
    bf16(p + "q_weight", g.hc_mult, g.hidden_size);
    bf16(p + "k_weight", g.hc_mult, g.hidden_size);
  }
  void f32_const(const std::string& name, int64_t n, double v) {
    add(name, DType::kF32, {n}, Fill::kConst, v, 0.0);
  }
  // The mHC site weights of block `p` ("layers.L." / "mtp.s."): m = fn · rms-normalised(H), fn
  // std 1/sqrt(hc·D) keeps the mixes ~N(0, 1) (tiny8: 0.05 at hc·D = 384); base N(0, 0.4) and
  // scale U(0.75, 1.25) are tiny8's magnitudes.
  void hc_sites(const SyntheticGeometry& g, const std::string& p) {
    const int64_t hc = g.hc_mult, D = g.hidden_size, mix = (2 + hc) * hc;
    for (const char* site : {"attn", "ffn"}) {
      const std::string h = fmt::format("{}hc_{}_", p, site);
      add(h + "fn", DType::kF32, {mix, hc * D}, Fill::kNormal, 0.0,
          1.0 / std::sqrt(double(hc * D)));
      add(h + "base", DType::kF32, {mix}, Fill::kNormal, 0.0, 0.4);
      add(h + "scale", DType::kF32, {3}, Fill::kUniform, 1.0, 0.25);
    }
  }
  // §2.2 projections, norms and sink of attention `a` ("....attn.").
  void attention(const SyntheticGeometry& g, const std::string& a) {
    const int64_t D = g.hidden_size, HD = int64_t{g.num_attention_heads} * g.head_dim;
    f32_const(a + "attn_sink", g.num_attention_heads, 0.0);
    fp8(a + "wq_a", g.q_lora_rank, D);
    norm(a + "q_norm.weight", g.q_lora_rank);
    fp8(a + "wq_b", HD, g.q_lora_rank);
    fp8(a + "wkv", g.head_dim, D);
    norm(a + "kv_norm.weight", g.head_dim);
    fp8(a + "wo_a", int64_t{g.o_groups} * g.o_lora_rank, HD / g.o_groups);
    fp8(a + "wo_b", D, int64_t{g.o_groups} * g.o_lora_rank);
  }
  // §4 router of E experts (N(0, 1/sqrt(D)), zero biases) and `stored` FP4 experts of `f`
  // ("....ffn.").
  void router_experts(const SyntheticGeometry& g, const std::string& f, int64_t E, int64_t stored) {
    const int64_t D = g.hidden_size, I = g.moe_intermediate_size;
    bf16(f + "gate.weight", E, D);
    f32_const(f + "gate.bias", E, 0.0);
    f32_const(f + "gate.bias_vl", E, 0.0);
    for (int64_t e = 0; e < stored; ++e) {
      const std::string x = fmt::format("{}experts.{}.", f, e);
      fp4(x + "w1", I, D);
      fp4(x + "w2", D, I);
      fp4(x + "w3", I, D);
    }
  }
  void shared_expert(const SyntheticGeometry& g, const std::string& f) {
    const int64_t D = g.hidden_size, IS = int64_t{g.moe_intermediate_size} * g.n_shared_experts;
    fp8(f + "shared_experts.w1", IS, D);
    fp8(f + "shared_experts.w2", D, IS);
    fp8(f + "shared_experts.w3", IS, D);
  }

 private:
  std::vector<SyntheticTensor>* out_;
};

void check_roles(const SyntheticGeometry& g) {
  const int L = g.num_hidden_layers;
  DSV41_CHECK(L >= 1 && static_cast<int>(g.compress_ratios.size()) == L, kInvalidArgument,
              "synthetic geometry: compress_ratios has {} entries for {} layers",
              g.compress_ratios.size(), L);
  for (int id : g.kv_source_layer_ids)
    DSV41_CHECK(contains(g.index_source_layer_ids, id), kInvalidArgument,
                "synthetic geometry: KV source {} must also be an index source", id);
  DSV41_CHECK(g.expert_pool >= 0 && g.expert_pool <= g.n_routed_experts, kInvalidArgument,
              "synthetic geometry: expert_pool {} is outside [0, n_routed_experts = {}]",
              g.expert_pool, g.n_routed_experts);
  DSV41_CHECK(
      g.dspark_stages == 0 || (g.num_hidden_layers >= 3 && g.dspark_top_k >= 1 &&
                               g.dspark_top_k <= g.dspark_experts && g.n_shared_experts >= 1),
      kInvalidArgument,
      "synthetic geometry: DSpark needs >= 3 layers, 1 <= top-k {} <= experts {} and a "
      "shared expert",
      g.dspark_top_k, g.dspark_experts);
  DSV41_CHECK(g.num_attention_heads % g.o_groups == 0, kInvalidArgument,
              "synthetic geometry: o_groups {} must divide {} heads", g.o_groups,
              g.num_attention_heads);
}

}  // namespace

std::vector<SyntheticTensor> synthetic_tensors(const SyntheticGeometry& g,
                                               const SyntheticExl3& exl3) {
  check_roles(g);
  exl3.validate();
  DSV41_CHECK(!(exl3.enabled && g.expert_pool > 0), kInvalidArgument,
              "synthetic geometry: expert_pool {} with EXL3 banks (the pool is release FP4 only)",
              g.expert_pool);
  std::vector<SyntheticTensor> out;
  ListBuilder b(&out);
  const int64_t D = g.hidden_size, V = g.vocab_size, E = g.n_routed_experts;
  const int64_t stored = g.expert_pool > 0 ? g.expert_pool : E;  // experts with tensors
  b.add("embed.weight", DType::kBF16, {V, D}, Fill::kNormal, 0.0, 1.0);
  for (int l = 0; l < g.num_hidden_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    b.hc_sites(g, p);
    const std::string a = p + "attn.";
    b.attention(g, a);
    const bool kv = contains(g.kv_source_layer_ids, l);
    const bool ix = contains(g.index_source_layer_ids, l);
    if (kv) {
      b.bf16(a + "compressor.wkv.weight", g.head_dim, D);
      if (g.compress_ratios[l] > 1) b.bf16(a + "compressor.wgate.weight", g.head_dim, D);
      b.norm(a + "compressor.norm.weight", g.head_dim);
    }
    if (ix) {
      b.fp8(a + "indexer.wq_b", int64_t{g.index_n_heads} * g.index_head_dim, g.q_lora_rank);
      b.bf16(a + "indexer.weights_proj.weight", g.index_n_heads, D);
    }
    if (kv) {
      b.bf16(a + "indexer.wk.weight", g.index_head_dim, g.head_dim);
      b.norm(a + "indexer.k_norm.weight", g.index_head_dim);
    }
    const std::string f = p + "ffn.";
    b.router_experts(g, f, E, exl3.enabled ? 0 : stored);  // else in the EXL3 banks
    if (g.n_shared_experts > 0) b.shared_expert(g, f);
    b.norm(p + "attn_norm.weight", D);
    b.norm(p + "ffn_norm.weight", D);
    const std::vector<int>& en = g.engram.layer_ids;
    const auto it = std::find(en.begin(), en.end(), l);
    if (it != en.end()) b.engram(g, p + "engram.", g.engram.num_embeddings[it - en.begin()]);
  }
  b.norm("norm.weight", D);
  b.bf16("head.weight", V, D);
  for (int s = 0; s < g.dspark_stages; ++s) {  // §1.5: window-only blocks with their own MoE
    const std::string p = fmt::format("mtp.{}.", s);
    b.hc_sites(g, p);
    b.attention(g, p + "attn.");
    const int64_t DE = g.dspark_experts;
    b.router_experts(g, p + "ffn.", DE,
                     g.expert_pool > 0 ? std::min<int64_t>(g.expert_pool, DE) : DE);
    b.shared_expert(g, p + "ffn.");
    b.norm(p + "attn_norm.weight", D);
    b.norm(p + "ffn_norm.weight", D);
  }
  if (g.dspark_stages > 0) {
    const std::string last = fmt::format("mtp.{}.", g.dspark_stages - 1);
    const int64_t R = g.dspark_markov_rank;
    b.bf16("mtp.0.main_proj.weight", D, 3 * D);
    b.norm("mtp.0.main_norm.weight", D);
    b.norm(last + "norm.weight", D);
    b.add(last + "markov_head.embed.weight", DType::kBF16, {V, R}, Fill::kNormal, 0.0, 1.0);
    b.bf16(last + "markov_head.head.weight", V, R);
    b.add(last + "confidence_head.proj.weight", DType::kF32, {1, D + R}, Fill::kNormal, 0.0,
          1.0 / std::sqrt(double(D + R)));
  }
  if (g.vision.hidden_size > 0) {  // §7.3-7.4; biases 0, norms 1, delimiters like embeddings
    const SyntheticGeometry::Vision& v = g.vision;
    const int64_t h = v.hidden_size, in = int64_t{3} * v.patch_size * v.patch_size;
    b.bf16("vision.patch_embed.proj.weight", h, in);
    b.add("vision.patch_embed.proj.bias", DType::kBF16, {h}, Fill::kConst, 0.0, 0.0);
    for (int l = 0; l < v.num_hidden_layers; ++l) {
      const std::string p = fmt::format("vision.blocks.{}.", l);
      b.norm(p + "norm1.weight", h);
      b.bf16(p + "attn.wqkv.weight", 3 * h, h);
      b.add(p + "attn.wqkv.bias", DType::kBF16, {3 * h}, Fill::kConst, 0.0, 0.0);
      b.bf16(p + "attn.wo.weight", h, h);
      b.add(p + "attn.wo.bias", DType::kBF16, {h}, Fill::kConst, 0.0, 0.0);
      b.norm(p + "norm2.weight", h);
      b.bf16(p + "mlp.w1.weight", 2 * int64_t{v.intermediate_size}, h);
      b.bf16(p + "mlp.w2.weight", h, v.intermediate_size);
    }
    b.norm("vision.norm.weight", h);
    b.bf16("aligner.w1.weight", D, h * v.downsample_ratio * v.downsample_ratio);
    b.add("aligner.w1.bias", DType::kBF16, {D}, Fill::kConst, 0.0, 0.0);
    b.bf16("aligner.w2.weight", D, D);
    b.add("aligner.w2.bias", DType::kBF16, {D}, Fill::kConst, 0.0, 0.0);
    for (const char* n : {"image_start", "image_newline", "image_end", "image_pad"})
      b.add(n, DType::kBF16, {D}, Fill::kNormal, 0.0, 1.0);
  }
  return out;
}

uint64_t synthetic_data_bytes(const SyntheticGeometry& g, const SyntheticExl3& exl3) {
  uint64_t n = 0;
  for (const SyntheticTensor& t : synthetic_tensors(g, exl3)) n += t.nbytes();
  return n;
}

namespace {
std::string int_list(const std::vector<int>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// The text_config engram_* lines (4-space indent, each ending in ",").
std::string engram_keys(const SyntheticGeometry::Engram& e) {
  if (e.layer_ids.empty()) return "    \"engram_layer_ids\": [],";
  return fmt::format(
      "    \"engram_layer_ids\": {},\n    \"engram_num_embeddings\": [{}],\n"
      "    \"engram_vocab_size\": {},\n    \"engram_max_ngram_size\": {},\n"
      "    \"engram_n_heads\": {},\n    \"engram_head_dim\": {},\n"
      "    \"engram_pad_token_id\": {},\n    \"engram_compressed_vocab_size\": {},",
      int_list(e.layer_ids), fmt::join(e.num_embeddings, ", "), e.vocab_size, e.max_ngram_size,
      e.n_heads, e.head_dim, e.pad_token_id, e.compressed_vocab_size);
}
}  // namespace

namespace {

// num_nextn_predict_layers and, with DSpark, its keys (spec §1.2; the noise id the release's
// 128799 when it fits the vocabulary, else the last id).
std::string dspark_keys(const SyntheticGeometry& g) {
  if (g.dspark_stages == 0) return "    \"num_nextn_predict_layers\": 0,";
  const int L = g.num_hidden_layers;
  return fmt::format(
      "    \"num_nextn_predict_layers\": {},\n    \"dspark_block_size\": 5,\n"
      "    \"dspark_noise_token_id\": {},\n    \"dspark_target_layer_ids\": [{}, {}, {}],\n"
      "    \"dspark_markov_rank\": {},\n    \"dspark_n_routed_experts\": {},\n"
      "    \"dspark_num_experts_per_tok\": {},",
      g.dspark_stages, std::min<int64_t>(128799, g.vocab_size - 1), L - 3, L - 2, L - 1,
      g.dspark_markov_rank, g.dspark_experts, g.dspark_top_k);
}

}  // namespace

std::string synthetic_config_json(const SyntheticGeometry& g) {
  std::vector<int> ratios = g.compress_ratios;  // + the DSpark layers' 0s (§1.2: 43 entries)
  ratios.insert(ratios.end(), static_cast<size_t>(g.dspark_stages), 0);
  // image_token_id: the release's 129264 when it fits, else the last id (the validator wants it
  // inside the vocabulary; text-only inference never reads it).
  const int64_t image_id = g.vocab_size > 129264 ? 129264 : g.vocab_size - 1;
  std::string s = fmt::format(R"({{
  "architectures": ["DeepseekV41ForCausalLM"],
  "model_type": "deepseek_v41",
  "dtype": "bfloat16",
  "bos_token_id": 0,
  "eos_token_id": 1,
  "pad_token_id": 2,
  "image_token_id": {},
  "tie_word_embeddings": false,
  "quantization_config": {{
    "quant_method": "fp8",
    "activation_scheme": "dynamic",
    "weight_block_size": [32, 32],
    "scale_fmt": "ue8m0",
    "expert_dtype": "fp4"
  }},
)",
                              image_id);
  if (g.vision.hidden_size > 0) {
    const SyntheticGeometry::Vision& v = g.vision;
    s += fmt::format(R"(  "vision_config": {{
    "model_type": "deepseek_v41_vision",
    "hidden_size": {},
    "intermediate_size": {},
    "num_hidden_layers": {},
    "num_attention_heads": {},
    "patch_size": {},
    "downsample_ratio": {},
    "rope_theta": 10000.0,
    "max_image_tokens": {},
    "min_pixels": {},
    "max_wh_ratio": null
  }},
)",
                     v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.num_attention_heads,
                     v.patch_size, v.downsample_ratio, v.max_image_tokens, v.min_pixels);
  }
  s +=
      fmt::format(R"(  "text_config": {{
    "model_type": "deepseek_v41_text",
    "vocab_size": {},
    "hidden_size": {},
    "num_hidden_layers": {},
    "num_attention_heads": {},
    "num_key_value_heads": 1,
    "head_dim": {},
    "q_lora_rank": {},
    "qk_rope_head_dim": {},
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "rope_scaling": {{"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 65536}},
    "max_position_embeddings": 1048576,
    "attention_bias": false,
    "sliding_window": {},
    "compress_ratios": {},
    "kv_source_layer_ids": {},
    "index_source_layer_ids": {},
    "candidate_source_layer_id": {},
    "candidate_topk_blocks": {},
    "candidate_block_size": {},
    "index_n_heads": {},
    "index_head_dim": {},
    "index_topk": {},
    "o_groups": {},
    "o_lora_rank": {},
)",
                  g.vocab_size, g.hidden_size, g.num_hidden_layers, g.num_attention_heads,
                  g.head_dim, g.q_lora_rank, g.qk_rope_head_dim, g.sliding_window, int_list(ratios),
                  int_list(g.kv_source_layer_ids), int_list(g.index_source_layer_ids),
                  g.candidate_source_layer_id, g.candidate_topk_blocks, g.candidate_block_size,
                  g.index_n_heads, g.index_head_dim, g.index_topk, g.o_groups, g.o_lora_rank);
  s += fmt::format(
      R"(    "moe_intermediate_size": {},
    "n_routed_experts": {},{}
    "n_shared_experts": {},
    "num_experts_per_tok": {},
    "scoring_func": "sqrtsoftplus",
    "gate_temp": 1.0,
    "norm_topk_prob": true,
    "routed_scaling_factor": {:.4f},
    "topk_method": "noaux_tc",
    "swiglu_limit": {:.4f},
    "hidden_act": "silu",
    "hc_mult": {},
    "hc_sinkhorn_iters": {},
    "hc_eps": 1e-06,
    "rms_norm_eps": 1e-20,
{}
{}
    "tie_word_embeddings": false,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 2,
    "use_cache": true
  }}
}}
)",
      g.moe_intermediate_size, g.n_routed_experts,
      g.expert_pool > 0 ? fmt::format("\n    \"synthetic_expert_pool\": {},", g.expert_pool)
                        : std::string(),
      g.n_shared_experts, g.num_experts_per_tok, g.routed_scaling_factor, g.swiglu_limit, g.hc_mult,
      g.hc_sinkhorn_iters, engram_keys(g.engram), dspark_keys(g));
  return s;
}

}  // namespace dsv41::synth
