// config.json parsing (simdjson) and validation; derivation of the per-layer roles (§2.1, §2.6).
#include "config/model_config.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "core/check.hpp"

namespace dsv41 {

const char* attn_role_name(AttnRole r) {
  switch (r) {
    case AttnRole::kSwa:
      return "swa";
    case AttnRole::kFull:
      return "full";
    case AttnRole::kReuse:
      return "reuse";
    case AttnRole::kReindex:
      return "reindex";
  }
  return "?";
}

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// Reads optional keys of one JSON object; type errors name "<origin>: <section>.<key>".
class Reader {
 public:
  Reader(object obj, std::string origin, std::string section)
      : obj_(obj), origin_(std::move(origin)), section_(std::move(section)) {}

  std::string where(const std::string& key) const {
    return fmt::format("{}: {}{}", origin_, section_.empty() ? "" : section_ + ".", key);
  }
  bool has(const std::string& key) const {
    element e;
    return !obj_[key].get(e) && !e.is_null();
  }
  template <typename T>
  void integer(const std::string& key, T* out) const {
    element e;
    if (obj_[key].get(e) || e.is_null()) return;
    int64_t v;
    DSV41_CHECK(!e.get_int64().get(v), kInvalidArgument, "{} must be an integer", where(key));
    *out = fits<T>(v, where(key));
  }
  void number(const std::string& key, double* out) const {
    element e;
    if (obj_[key].get(e) || e.is_null()) return;
    double v;
    DSV41_CHECK(!e.get_double().get(v), kInvalidArgument, "{} must be a number", where(key));
    *out = v;
  }
  void boolean(const std::string& key, bool* out) const {
    element e;
    if (obj_[key].get(e) || e.is_null()) return;
    bool v;
    DSV41_CHECK(!e.get_bool().get(v), kInvalidArgument, "{} must be true or false", where(key));
    *out = v;
  }
  void string(const std::string& key, std::string* out) const {
    element e;
    if (obj_[key].get(e) || e.is_null()) return;
    std::string_view v;
    DSV41_CHECK(!e.get_string().get(v), kInvalidArgument, "{} must be a string", where(key));
    *out = std::string(v);
  }
  template <typename T>
  void int_list(const std::string& key, std::vector<T>* out) const {
    element e;
    if (obj_[key].get(e) || e.is_null()) return;
    simdjson::dom::array a;
    DSV41_CHECK(!e.get_array().get(a), kInvalidArgument, "{} must be an array of integers",
                where(key));
    out->clear();
    size_t i = 0;
    for (element x : a) {
      int64_t v;
      DSV41_CHECK(!x.get_int64().get(v), kInvalidArgument, "{}[{}] must be an integer", where(key),
                  i);
      out->push_back(fits<T>(v, fmt::format("{}[{}]", where(key), i)));
      ++i;
    }
  }
  Reader child(object o, const std::string& key) const {
    return Reader(o, origin_, section_.empty() ? key : section_ + "." + key);
  }
  bool sub(const std::string& key, object* out) const {
    element e;
    if (obj_[key].get(e) || e.is_null()) return false;
    DSV41_CHECK(!e.get_object().get(*out), kInvalidArgument, "{} must be an object", where(key));
    return true;
  }

 private:
  // v as a T, refused where it does not fit (4294967297 would otherwise become layer count 1).
  template <typename T>
  static T fits(int64_t v, const std::string& field) {
    DSV41_CHECK(std::in_range<T>(v), kInvalidArgument, "{} = {} is outside [{}, {}]", field, v,
                std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    return static_cast<T>(v);
  }

  object obj_;
  std::string origin_, section_;
};

void read_text(const Reader& r, TextConfig* t) {
  r.integer("vocab_size", &t->vocab_size);
  r.integer("hidden_size", &t->hidden_size);
  r.integer("num_hidden_layers", &t->num_hidden_layers);
  r.integer("num_attention_heads", &t->num_attention_heads);
  r.integer("num_key_value_heads", &t->num_key_value_heads);
  r.integer("head_dim", &t->head_dim);
  r.integer("qk_rope_head_dim", &t->qk_rope_head_dim);
  r.integer("q_lora_rank", &t->q_lora_rank);
  r.integer("o_groups", &t->o_groups);
  r.integer("o_lora_rank", &t->o_lora_rank);
  r.number("rope_theta", &t->rope_theta);
  r.number("compress_rope_theta", &t->compress_rope_theta);
  r.integer("max_position_embeddings", &t->max_position_embeddings);
  r.integer("sliding_window", &t->sliding_window);
  r.int_list("compress_ratios", &t->compress_ratios);
  r.int_list("kv_source_layer_ids", &t->kv_source_layer_ids);
  r.int_list("index_source_layer_ids", &t->index_source_layer_ids);
  r.integer("candidate_source_layer_id", &t->candidate_source_layer_id);
  r.integer("candidate_topk_blocks", &t->candidate_topk_blocks);
  r.integer("candidate_block_size", &t->candidate_block_size);
  r.integer("index_n_heads", &t->index_n_heads);
  r.integer("index_head_dim", &t->index_head_dim);
  r.integer("index_topk", &t->index_topk);
  r.integer("moe_intermediate_size", &t->moe_intermediate_size);
  r.integer("n_routed_experts", &t->n_routed_experts);
  r.integer("synthetic_expert_pool", &t->synthetic_expert_pool);
  r.integer("num_experts_per_tok", &t->num_experts_per_tok);
  r.integer("n_shared_experts", &t->n_shared_experts);
  r.string("scoring_func", &t->scoring_func);
  r.string("topk_method", &t->topk_method);
  r.boolean("norm_topk_prob", &t->norm_topk_prob);
  r.number("routed_scaling_factor", &t->routed_scaling_factor);
  r.number("gate_temp", &t->gate_temp);
  r.number("swiglu_limit", &t->swiglu_limit);
  r.string("hidden_act", &t->hidden_act);
  r.integer("hc_mult", &t->hc_mult);
  r.integer("hc_sinkhorn_iters", &t->hc_sinkhorn_iters);
  r.number("hc_eps", &t->hc_eps);
  r.number("rms_norm_eps", &t->rms_norm_eps);
  r.int_list("engram_layer_ids", &t->engram_layer_ids);
  r.int_list("engram_num_embeddings", &t->engram_num_embeddings);
  r.integer("engram_vocab_size", &t->engram_vocab_size);
  r.integer("engram_max_ngram_size", &t->engram_max_ngram_size);
  r.integer("engram_n_heads", &t->engram_n_heads);
  r.integer("engram_head_dim", &t->engram_head_dim);
  // The oracle (HF) spells it engram_pad_id, the release engram_pad_token_id (spec §1.2).
  r.integer("engram_pad_id", &t->engram_pad_token_id);
  r.integer("engram_pad_token_id", &t->engram_pad_token_id);
  r.integer("engram_compressed_vocab_size", &t->engram_compressed_vocab_size);
  r.integer("num_nextn_predict_layers", &t->num_nextn_predict_layers);
  r.integer("dspark_block_size", &t->dspark_block_size);
  r.integer("dspark_noise_token_id", &t->dspark_noise_token_id);
  r.int_list("dspark_target_layer_ids", &t->dspark_target_layer_ids);
  r.integer("dspark_markov_rank", &t->dspark_markov_rank);
  r.integer("dspark_n_routed_experts", &t->dspark_n_routed_experts);
  r.integer("dspark_num_experts_per_tok", &t->dspark_num_experts_per_tok);
  object rs;
  if (r.sub("rope_scaling", &rs)) {
    Reader sr = r.child(rs, "rope_scaling");
    std::string type;
    sr.string("rope_type", &type);
    if (type.empty()) sr.string("type", &type);
    t->rope_scaling.rope_type = type;
    sr.number("factor", &t->rope_scaling.factor);
    sr.number("beta_fast", &t->rope_scaling.beta_fast);
    sr.number("beta_slow", &t->rope_scaling.beta_slow);
    sr.integer("original_max_position_embeddings",
               &t->rope_scaling.original_max_position_embeddings);
  }
}

void read_vision(const Reader& r, VisionConfig* v) {
  r.integer("hidden_size", &v->hidden_size);
  r.integer("intermediate_size", &v->intermediate_size);
  r.integer("num_hidden_layers", &v->num_hidden_layers);
  r.integer("num_attention_heads", &v->num_attention_heads);
  r.integer("patch_size", &v->patch_size);
  r.integer("downsample_ratio", &v->downsample_ratio);
  r.number("rope_theta", &v->rope_theta);
  r.integer("max_image_tokens", &v->max_image_tokens);
  r.integer("min_pixels", &v->min_pixels);
  r.number("max_wh_ratio", &v->max_wh_ratio);
}

}  // namespace

Result<ModelConfig> ModelConfig::parse(const std::string& json, const std::string& origin) {
  ModelConfig cfg;
  Status st = detail::capture_status([&] {
    simdjson::dom::parser parser;
    element root;
    auto err = parser.parse(simdjson::padded_string(json)).get(root);
    DSV41_CHECK(!err, kInvalidArgument, "{}: not valid JSON: {}", origin,
                simdjson::error_message(err));
    object top;
    DSV41_CHECK(!root.get_object().get(top), kInvalidArgument, "{}: not a JSON object", origin);
    Reader r(top, origin, "");
    r.string("model_type", &cfg.model_type);
    r.integer("bos_token_id", &cfg.bos_token_id);
    r.integer("eos_token_id", &cfg.eos_token_id);
    r.integer("pad_token_id", &cfg.pad_token_id);
    r.integer("image_token_id", &cfg.image_token_id);
    r.boolean("tie_word_embeddings", &cfg.tie_word_embeddings);
    object text;
    if (r.sub("text_config", &text)) {
      read_text(r.child(text, "text_config"), &cfg.text);
    } else {
      read_text(r, &cfg.text);  // flat (text-only) layout
    }
    object vision;
    cfg.has_vision = r.sub("vision_config", &vision);
    if (cfg.has_vision) read_vision(r.child(vision, "vision_config"), &cfg.vision);
    object q;
    if (r.sub("quantization_config", &q)) {
      Reader qr = r.child(q, "quantization_config");
      qr.string("quant_method", &cfg.quant.quant_method);
      qr.string("scale_fmt", &cfg.quant.scale_fmt);
      qr.string("expert_dtype", &cfg.quant.expert_dtype);
      std::vector<int> block;
      qr.int_list("weight_block_size", &block);
      if (!block.empty()) {
        DSV41_CHECK(block.size() == 2 && block[0] > 0 && block[1] > 0, kInvalidArgument,
                    "{} must be two positive integers", qr.where("weight_block_size"));
        cfg.quant.weight_block_rows = block[0];
        cfg.quant.weight_block_cols = block[1];
      }
    }
  });
  if (!st.is_ok()) return st;
  return cfg;
}

Result<ModelConfig> ModelConfig::load(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::kNotFound, path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  auto cfg = parse(ss.str(), path);
  if (!cfg.is_ok()) return cfg;
  Status st = cfg->validate();
  if (!st.is_ok()) return Status(st.code(), path + ": " + st.message());
  return cfg;
}

}  // namespace dsv41
