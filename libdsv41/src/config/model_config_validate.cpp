// ModelConfig::validate(): every key and cross-key rule, and the per-layer role derivation
// (spec model-architecture.md §1.2, §2.1, §2.6). Messages name the key ("text_config.<key>").
#include <algorithm>
#include <cmath>

#include "config/model_config.hpp"
#include "core/check.hpp"

namespace dsv41 {

namespace {

#define CFG_CHECK(cond, ...) DSV41_CHECK(cond, kInvalidArgument, __VA_ARGS__)

void positive(int64_t v, const char* key) {
  CFG_CHECK(v > 0, "text_config.{} = {} must be positive", key, v);
}

// Layer ids: strictly increasing, inside [0, n).
void check_layer_list(const std::vector<int>& ids, int n, const char* key) {
  for (size_t i = 0; i < ids.size(); ++i) {
    CFG_CHECK(ids[i] >= 0 && ids[i] < n, "text_config.{}[{}] = {} is outside [0, {})", key, i,
              ids[i], n);
    CFG_CHECK(i == 0 || ids[i] > ids[i - 1],
              "text_config.{} must be strictly increasing ({} after {})", key, ids[i], ids[i - 1]);
  }
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_text(const TextConfig& t) {
  positive(t.vocab_size, "vocab_size");
  positive(t.hidden_size, "hidden_size");
  positive(t.num_hidden_layers, "num_hidden_layers");
  positive(t.num_attention_heads, "num_attention_heads");
  positive(t.head_dim, "head_dim");
  positive(t.q_lora_rank, "q_lora_rank");
  positive(t.o_groups, "o_groups");
  positive(t.o_lora_rank, "o_lora_rank");
  positive(t.sliding_window, "sliding_window");
  positive(t.moe_intermediate_size, "moe_intermediate_size");
  positive(t.n_routed_experts, "n_routed_experts");
  positive(t.num_experts_per_tok, "num_experts_per_tok");
  positive(t.hc_mult, "hc_mult");
  positive(t.hc_sinkhorn_iters, "hc_sinkhorn_iters");
  positive(t.max_position_embeddings, "max_position_embeddings");
  // The release runs 20 Sinkhorn iterations per mHC site; 2^31 - 1 would look like a hang (every
  // token's every site loops that often), so the count is bounded at 50x the release.
  CFG_CHECK(t.hc_sinkhorn_iters <= 1000, "text_config.hc_sinkhorn_iters = {} exceeds 1000",
            t.hc_sinkhorn_iters);
  CFG_CHECK(t.num_key_value_heads == 1,
            "text_config.num_key_value_heads = {}: V4.1 attention has one shared K=V latent (1)",
            t.num_key_value_heads);
  CFG_CHECK(
      t.qk_rope_head_dim > 0 && t.qk_rope_head_dim % 2 == 0 && t.qk_rope_head_dim <= t.head_dim,
      "text_config.qk_rope_head_dim = {} must be even and in (0, head_dim = {}]",
      t.qk_rope_head_dim, t.head_dim);
  CFG_CHECK(t.num_attention_heads % t.o_groups == 0,
            "text_config.o_groups = {} must divide num_attention_heads = {}", t.o_groups,
            t.num_attention_heads);
  CFG_CHECK(t.synthetic_expert_pool >= 0 && t.synthetic_expert_pool <= t.n_routed_experts,
            "text_config.synthetic_expert_pool = {} is outside [0, n_routed_experts = {}]",
            t.synthetic_expert_pool, t.n_routed_experts);
  CFG_CHECK(t.num_experts_per_tok <= t.n_routed_experts,
            "text_config.num_experts_per_tok = {} exceeds n_routed_experts = {}",
            t.num_experts_per_tok, t.n_routed_experts);
  CFG_CHECK(t.n_shared_experts >= 0, "text_config.n_shared_experts = {} must be >= 0",
            t.n_shared_experts);
  DSV41_CHECK(t.scoring_func == "sqrtsoftplus", kUnsupported,
              "text_config.scoring_func = '{}' is not supported (V4.1 uses sqrtsoftplus)",
              t.scoring_func);
  DSV41_CHECK(t.topk_method == "noaux_tc", kUnsupported,
              "text_config.topk_method = '{}' is not supported (V4.1 uses noaux_tc)",
              t.topk_method);
  DSV41_CHECK(t.hidden_act == "silu", kUnsupported,
              "text_config.hidden_act = '{}' is not supported (silu)", t.hidden_act);
  CFG_CHECK(t.rms_norm_eps >= 0, "text_config.rms_norm_eps = {} must be >= 0", t.rms_norm_eps);
  CFG_CHECK(t.hc_eps >= 0, "text_config.hc_eps = {} must be >= 0", t.hc_eps);
  CFG_CHECK(t.gate_temp > 0, "text_config.gate_temp = {} must be positive", t.gate_temp);
  CFG_CHECK(t.swiglu_limit >= 0, "text_config.swiglu_limit = {} must be >= 0", t.swiglu_limit);
  // RoPE bases: ln(base) divides YaRN's correction dims and base^(2i/d) must grow with i, so a
  // base <= 1 gives inf/NaN or inverted frequencies (-10000 made 7 of 8 inverse frequencies
  // non-finite); JSON has no inf, but 1e-400 reads as 0.
  CFG_CHECK(std::isfinite(t.rope_theta) && t.rope_theta > 1,
            "text_config.rope_theta = {} must be a finite number > 1", t.rope_theta);
  CFG_CHECK(std::isfinite(t.compress_rope_theta) && t.compress_rope_theta > 1,
            "text_config.compress_rope_theta = {} must be a finite number > 1",
            t.compress_rope_theta);
  const auto& rs = t.rope_scaling;
  DSV41_CHECK(rs.rope_type.empty() || rs.rope_type == "yarn", kUnsupported,
              "text_config.rope_scaling.rope_type = '{}' is not supported (yarn)", rs.rope_type);
  if (rs.rope_type == "yarn") {
    CFG_CHECK(std::isfinite(rs.factor) && rs.factor > 0,
              "text_config.rope_scaling.factor = {} must be positive", rs.factor);
    // ln(max_pos / (beta · 2π)): a negative beta is NaN (0 means HF's default, 32 / 1).
    CFG_CHECK(std::isfinite(rs.beta_fast) && rs.beta_fast >= 0,
              "text_config.rope_scaling.beta_fast = {} must be >= 0", rs.beta_fast);
    CFG_CHECK(std::isfinite(rs.beta_slow) && rs.beta_slow >= 0,
              "text_config.rope_scaling.beta_slow = {} must be >= 0", rs.beta_slow);
    CFG_CHECK(rs.original_max_position_embeddings > 0,
              "text_config.rope_scaling.original_max_position_embeddings must be positive");
  }
}

void check_engram(const TextConfig& t) {
  const int L = t.num_hidden_layers;
  check_layer_list(t.engram_layer_ids, L, "engram_layer_ids");
  if (t.engram_layer_ids.empty()) return;
  CFG_CHECK(t.engram_num_embeddings.size() == t.engram_layer_ids.size(),
            "text_config.engram_num_embeddings has {} entries, engram_layer_ids has {}",
            t.engram_num_embeddings.size(), t.engram_layer_ids.size());
  for (size_t i = 0; i < t.engram_num_embeddings.size(); ++i)
    CFG_CHECK(t.engram_num_embeddings[i] > 0,
              "text_config.engram_num_embeddings[{}] = {} must be positive", i,
              t.engram_num_embeddings[i]);
  CFG_CHECK(t.engram_max_ngram_size >= 2, "text_config.engram_max_ngram_size = {} must be >= 2",
            t.engram_max_ngram_size);
  positive(t.engram_n_heads, "engram_n_heads");
  positive(t.engram_vocab_size, "engram_vocab_size");
  positive(t.engram_compressed_vocab_size, "engram_compressed_vocab_size");
  CFG_CHECK(t.engram_head_dim > 0 && t.engram_head_dim % 32 == 0,
            "text_config.engram_head_dim = {} must be a positive multiple of 32 (one E8M0 scale "
            "per 32 channels)",
            t.engram_head_dim);
  CFG_CHECK(t.engram_pad_token_id >= 0 && t.engram_pad_token_id < t.vocab_size,
            "text_config.engram_pad_token_id = {} is outside the vocabulary [0, {})",
            t.engram_pad_token_id, t.vocab_size);
}

// Roles of the backbone layers (§2.1): the schedule is described by the source lists; a Reuse layer
// reads the latest KV source and the latest index source at or before it.
std::vector<LayerRole> derive_roles(const TextConfig& t) {
  const int L = t.num_hidden_layers;
  const int nextn = t.num_nextn_predict_layers;
  CFG_CHECK(nextn >= 0, "text_config.num_nextn_predict_layers = {} must be >= 0", nextn);
  CFG_CHECK(static_cast<int>(t.compress_ratios.size()) == L + nextn,
            "text_config.compress_ratios has {} entries, expected num_hidden_layers + "
            "num_nextn_predict_layers = {}",
            t.compress_ratios.size(), L + nextn);
  for (size_t i = 0; i < t.compress_ratios.size(); ++i) {
    CFG_CHECK(t.compress_ratios[i] >= 0, "text_config.compress_ratios[{}] = {} must be >= 0", i,
              t.compress_ratios[i]);
    CFG_CHECK(static_cast<int>(i) < L || t.compress_ratios[i] == 0,
              "text_config.compress_ratios[{}] = {}: DSpark layers are SWA-only (0)", i,
              t.compress_ratios[i]);
  }
  check_layer_list(t.kv_source_layer_ids, L, "kv_source_layer_ids");
  check_layer_list(t.index_source_layer_ids, L, "index_source_layer_ids");
  const int cand = t.candidate_source_layer_id;
  CFG_CHECK(cand == -1 || (cand >= 0 && cand < L),
            "text_config.candidate_source_layer_id = {} is outside [0, {})", cand, L);
  if (cand >= 0) {
    CFG_CHECK(contains(t.kv_source_layer_ids, cand) && contains(t.index_source_layer_ids, cand),
              "text_config.candidate_source_layer_id = {} must identify a Full-mode layer (a KV "
              "source that is also an index source)",
              cand);
    positive(t.candidate_topk_blocks, "candidate_topk_blocks");
    positive(t.candidate_block_size, "candidate_block_size");
  }
  if (!t.index_source_layer_ids.empty()) {
    positive(t.index_n_heads, "index_n_heads");
    positive(t.index_topk, "index_topk");
    CFG_CHECK(t.index_head_dim >= t.qk_rope_head_dim,
              "text_config.index_head_dim = {} must be >= qk_rope_head_dim = {}", t.index_head_dim,
              t.qk_rope_head_dim);
  }
  std::vector<LayerRole> roles(L);
  int last_kv = -1, last_index = -1;
  for (int i = 0; i < L; ++i) {
    LayerRole& r = roles[i];
    r.layer = i;
    r.ratio = t.compress_ratios[i];
    r.kv_source = contains(t.kv_source_layer_ids, i);
    r.index_source = contains(t.index_source_layer_ids, i);
    r.candidate_source = i == cand;
    r.engram = contains(t.engram_layer_ids, i);
    r.compress_rope = r.ratio > 0;
    if (r.kv_source) last_kv = i;
    if (r.index_source) last_index = i;
    if (r.ratio == 0) {
      CFG_CHECK(!r.kv_source,
                "text_config.kv_source_layer_ids names layer {}, whose compress_ratio is 0", i);
      CFG_CHECK(!r.index_source,
                "text_config.index_source_layer_ids names layer {}, whose compress_ratio is 0", i);
      r.role = AttnRole::kSwa;
      continue;
    }
    CFG_CHECK(last_kv >= 0 && t.compress_ratios[last_kv] == r.ratio,
              "layer {} (compress_ratios = {}) has no preceding KV source with the same ratio in "
              "text_config.kv_source_layer_ids",
              i, r.ratio);
    CFG_CHECK(!r.kv_source || r.index_source,
              "layer {} is a KV source but not an index source: text_config.index_source_layer_ids "
              "must include every KV source (Full mode)",
              i);
    r.kv_layer = last_kv;
    r.index_layer = last_index;
    if (r.kv_source) {
      r.role = AttnRole::kFull;
    } else if (r.index_source) {
      r.role = AttnRole::kReindex;
      CFG_CHECK(cand >= 0 && cand == last_kv,
                "layer {} is a Reindex layer (index source, not KV source) but KV source {} is not "
                "the candidate source (text_config.candidate_source_layer_id = {})",
                i, last_kv, cand);
      r.candidate_layer = cand;
    } else {
      r.role = AttnRole::kReuse;
    }
  }
  return roles;
}

// §7: head_dim even (2D RoPE rotates halves, each half split between rows and columns: a
// multiple of 4), the 3-delimiter span fits max_image_tokens.
void check_vision(const VisionConfig& v, int image_token_id) {
  for (auto [x, key] : {std::pair{v.hidden_size, "hidden_size"},
                        {v.intermediate_size, "intermediate_size"},
                        {v.num_hidden_layers, "num_hidden_layers"},
                        {v.num_attention_heads, "num_attention_heads"},
                        {v.patch_size, "patch_size"},
                        {v.downsample_ratio, "downsample_ratio"}})
    CFG_CHECK(x > 0, "vision_config.{} = {} must be positive", key, x);
  CFG_CHECK(v.hidden_size % v.num_attention_heads == 0 && v.head_dim() % 4 == 0,
            "vision_config.hidden_size = {} must split into num_attention_heads = {} heads whose "
            "size is a multiple of 4 (2D RoPE)",
            v.hidden_size, v.num_attention_heads);
  CFG_CHECK(v.rope_theta > 0, "vision_config.rope_theta = {} must be positive", v.rope_theta);
  CFG_CHECK(v.max_image_tokens >= 4,
            "vision_config.max_image_tokens = {} must be at least 4 (start, one row, end)",
            v.max_image_tokens);
  CFG_CHECK(v.min_pixels >= 0, "vision_config.min_pixels = {} must be >= 0", v.min_pixels);
  CFG_CHECK(v.max_wh_ratio >= 0, "vision_config.max_wh_ratio = {} must be >= 0 (or null)",
            v.max_wh_ratio);
  CFG_CHECK(image_token_id >= 0, "image_token_id must be set when vision_config is present");
}

}  // namespace

Status ModelConfig::validate() {
  return detail::capture_status([&] {
    const TextConfig& t = text;
    check_text(t);
    for (auto [v, key] : {std::pair{bos_token_id, "bos_token_id"},
                          {eos_token_id, "eos_token_id"},
                          {pad_token_id, "pad_token_id"}}) {
      CFG_CHECK(v >= 0 && v < t.vocab_size, "{} = {} is outside the vocabulary [0, {})", key, v,
                t.vocab_size);
    }
    DSV41_CHECK(quant.quant_method.empty() || quant.quant_method == "fp8", kUnsupported,
                "quantization_config.quant_method = '{}' is not supported (fp8)",
                quant.quant_method);
    DSV41_CHECK(quant.scale_fmt.empty() || quant.scale_fmt == "ue8m0", kUnsupported,
                "quantization_config.scale_fmt = '{}' is not supported (ue8m0)", quant.scale_fmt);
    DSV41_CHECK(quant.expert_dtype.empty() || quant.expert_dtype == "fp4", kUnsupported,
                "quantization_config.expert_dtype = '{}' is not supported (fp4)",
                quant.expert_dtype);
    CFG_CHECK(image_token_id < t.vocab_size,
              "image_token_id = {} is outside the vocabulary [0, {})", image_token_id,
              t.vocab_size);
    if (t.num_nextn_predict_layers > 0) {
      CFG_CHECK(t.dspark_noise_token_id >= 0 && t.dspark_noise_token_id < t.vocab_size,
                "text_config.dspark_noise_token_id = {} is outside the vocabulary [0, {})",
                t.dspark_noise_token_id, t.vocab_size);
    }
    check_engram(t);
    if (has_vision) check_vision(vision, image_token_id);
    if (t.num_nextn_predict_layers > 0)
      check_layer_list(t.dspark_target_layer_ids, t.num_hidden_layers, "dspark_target_layer_ids");
    roles = derive_roles(t);
  });
}

}  // namespace dsv41
