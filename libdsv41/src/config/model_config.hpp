// ModelConfig: config.json of a DeepSeek-V4.1 checkpoint in the released nested form
// (`text_config`, `vision_config`, `quantization_config`), one validate(), and the derived
// per-layer attention roles (spec model-architecture.md §1.2, §2.1, §2.6). Field names equal the
// config keys so grepping `index_topk` finds both the config and its uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv41/status.hpp"

namespace dsv41 {

// §2.1: SWA-only (ratio 0); Full = KV source + index source; Reuse = window + another layer's
// compressed cache and selection; Reindex = own indexer queries over the KV source's keys,
// restricted to the candidate source's blocks.
enum class AttnRole { kSwa, kFull, kReuse, kReindex };
const char* attn_role_name(AttnRole r);

struct LayerRole {
  int layer = 0;
  int ratio = 0;  // compress_ratios[layer]
  AttnRole role = AttnRole::kSwa;
  bool kv_source = false;     // owns a compressor + index-key cache
  bool index_source = false;  // owns indexer queries (wq_b, weights_proj)
  bool candidate_source = false;
  bool engram = false;         // Engram block runs before this layer's attention site
  int kv_layer = -1;           // layer whose compressed KV this layer attends (-1: ratio 0)
  int index_layer = -1;        // layer whose top-k selection this layer uses (-1: ratio 0)
  int candidate_layer = -1;    // Reindex: the candidate source whose mask restricts the top-k
  bool compress_rope = false;  // ratio > 0: "compress" RoPE (YaRN, compress_rope_theta)
};

struct RopeScaling {
  std::string rope_type;  // "yarn" or "" (none)
  double factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 0;
};

struct TextConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 1;
  int head_dim = 0;
  int qk_rope_head_dim = 0;
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 0;
  int sliding_window = 0;
  std::vector<int> compress_ratios;  // num_hidden_layers (+ num_nextn_predict_layers) entries
  std::vector<int> kv_source_layer_ids;
  std::vector<int> index_source_layer_ids;
  int candidate_source_layer_id = -1;
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int moe_intermediate_size = 0;
  int n_routed_experts = 0;
  // Not a release key: benchmark checkpoints (bench/synthetic, docs/perf.md "Synthetic
  // full-geometry checkpoint") store only experts [0, pool) and route over all n_routed_experts,
  // expert e running expert e % pool's weights. 0 = every expert stored (the release).
  int synthetic_expert_pool = 0;
  int num_experts_per_tok = 0;
  int n_shared_experts = 0;
  std::string scoring_func = "sqrtsoftplus";
  std::string topk_method = "noaux_tc";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double gate_temp = 1.0;
  double swiglu_limit = 0.0;
  std::string hidden_act = "silu";
  int hc_mult = 1;
  int hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;
  int64_t engram_vocab_size = 0;
  int engram_max_ngram_size = 0;
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_token_id = 2;  // also read from the oracle's key `engram_pad_id`
  int64_t engram_compressed_vocab_size = 0;
  int num_nextn_predict_layers = 0;
  int dspark_block_size = 0;
  int dspark_noise_token_id = -1;
  std::vector<int> dspark_target_layer_ids;
  int dspark_markov_rank = 0;
  int dspark_n_routed_experts = 0;
  int dspark_num_experts_per_tok = 0;
};

struct QuantizationConfig {
  std::string quant_method;    // "fp8"
  int weight_block_rows = 32;  // weight_block_size[0]
  int weight_block_cols = 32;  // weight_block_size[1]
  std::string scale_fmt;       // "ue8m0"
  std::string expert_dtype;    // "fp4"
};

// vision_config (spec §7.1): the ViT, its 3x3 merge into the aligner, and the image sizing rules
// of §7.2. Defaults are the released values.
struct VisionConfig {
  int hidden_size = 1024;
  int intermediate_size = 2816;
  int num_hidden_layers = 32;
  int num_attention_heads = 16;
  int patch_size = 14;
  int downsample_ratio = 3;
  double rope_theta = 10000.0;
  int max_image_tokens = 1024;  // span length cap, delimiters included
  int64_t min_pixels = 295936;  // smaller images are sized up to this area (544²)
  double max_wh_ratio = 0.0;    // null in the release: 0 = no cap

  int head_dim() const { return hidden_size / num_attention_heads; }
};

struct ModelConfig {
  std::string model_type;
  int bos_token_id = 0;
  int eos_token_id = 1;
  int pad_token_id = 2;
  int image_token_id = -1;
  bool tie_word_embeddings = false;
  bool has_vision = false;  // vision_config present (the tower's tensors are checked at bind)
  TextConfig text;
  VisionConfig vision;
  QuantizationConfig quant;
  std::vector<LayerRole> roles;  // derived by validate(): one per backbone layer

  // Parses config.json text; `origin` names the file in errors. Does not validate.
  static Result<ModelConfig> parse(const std::string& json, const std::string& origin);
  // Reads DIR/config.json, parses and validates.
  static Result<ModelConfig> load(const std::string& model_dir);
  // Checks every key and cross-key rule; fills `roles`. Errors name the key, e.g.
  // "config.json: text_config.kv_source_layer_ids[1] = 41 is outside [0, 40)".
  Status validate();
};

}  // namespace dsv41
