// ModelConfig::parse / validate rejections (one check per rule of
// model_config*.cpp, each on a one-key mutation of the tiny8 fixture config)
// and the derived layer roles of both fixture configs against golden.json
// `layer_roles`.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "config/model_config.hpp"
#include "support/fixtures.hpp"

namespace dsv41 {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tiny8_json() { return read_file(test::fixture("golden/tiny8/config.json")); }

// Replaces the value of the first `"key":` (a scalar, or a bracketed array /
// object) with `value`.
std::string set_key(std::string json, const std::string& key, const std::string& value) {
  const std::string needle = "\"" + key + "\":";
  const size_t k = json.find(needle);
  REQUIRE(k != std::string::npos);
  size_t b = k + needle.size();
  while (json[b] == ' ') ++b;
  size_t e = b;
  if (json[b] == '[' || json[b] == '{') {
    const char open = json[b], close = open == '[' ? ']' : '}';
    int depth = 0;
    for (; e < json.size(); ++e) {
      if (json[e] == open) ++depth;
      if (json[e] == close && --depth == 0) break;
    }
    ++e;
  } else {
    while (json[e] != ',' && json[e] != '\n' && json[e] != '}') ++e;
  }
  return json.substr(0, b) + value + json.substr(e);
}

Status parse_and_validate(const std::string& json) {
  Result<ModelConfig> c = ModelConfig::parse(json, "config.json");
  if (!c) return c.status();
  return c->validate();
}

void expect_reject(const std::string& json, ErrorCode code, const std::string& fragment) {
  const Status s = parse_and_validate(json);
  INFO("expected an error containing '" << fragment << "', got: " << s.to_string());
  REQUIRE_FALSE(s.is_ok());
  REQUIRE(s.code() == code);
  REQUIRE(s.message().find(fragment) != std::string::npos);
}

void reject(const std::string& key, const std::string& value, const std::string& fragment,
            ErrorCode code = ErrorCode::kInvalidArgument) {
  INFO(key << " = " << value);
  expect_reject(set_key(tiny8_json(), key, value), code, fragment);
}

TEST_CASE("model config: the fixture configs validate", "[unit][config]") {
  REQUIRE(parse_and_validate(tiny8_json()).is_ok());
  REQUIRE(parse_and_validate(read_file(test::fixture("golden/tiny40/config.json"))).is_ok());
}

TEST_CASE("model config: positive-only keys are rejected at 0, naming the key", "[unit][config]") {
  for (const char* key : {"vocab_size",
                          "hidden_size",
                          "num_hidden_layers",
                          "num_attention_heads",
                          "head_dim",
                          "q_lora_rank",
                          "o_groups",
                          "o_lora_rank",
                          "sliding_window",
                          "moe_intermediate_size",
                          "n_routed_experts",
                          "num_experts_per_tok",
                          "hc_mult",
                          "hc_sinkhorn_iters",
                          "max_position_embeddings",
                          "engram_n_heads",
                          "engram_vocab_size",
                          "engram_compressed_vocab_size",
                          "index_n_heads",
                          "index_topk",
                          "candidate_topk_blocks",
                          "candidate_block_size"}) {
    reject(key, "0", std::string("text_config.") + key);
  }
}

TEST_CASE("model config: attention shape rules", "[unit][config]") {
  reject("num_key_value_heads", "2", "num_key_value_heads = 2");
  reject("qk_rope_head_dim", "31", "qk_rope_head_dim = 31 must be even");
  reject("qk_rope_head_dim", "66", "qk_rope_head_dim = 66");
  reject("o_groups", "2", "o_groups = 2 must divide num_attention_heads = 3");
  reject("index_head_dim", "16", "index_head_dim = 16 must be >= qk_rope_head_dim = 32");
}

TEST_CASE("model config: MoE and numeric rules", "[unit][config]") {
  reject("num_experts_per_tok", "7", "num_experts_per_tok = 7 exceeds n_routed_experts = 6");
  // Not in the release configs: added after n_routed_experts.
  for (const char* pool : {"7", "-1"}) {
    INFO("synthetic_expert_pool = " << pool);
    expect_reject(
        set_key(tiny8_json(), "n_routed_experts",
                std::string("6, \"synthetic_expert_pool\": ") + pool),
        ErrorCode::kInvalidArgument,
        std::string("synthetic_expert_pool = ") + pool + " is outside [0, n_routed_experts = 6]");
  }
  REQUIRE(parse_and_validate(
              set_key(tiny8_json(), "n_routed_experts", "6, \"synthetic_expert_pool\": 3"))
              .is_ok());
  reject("n_shared_experts", "-1", "n_shared_experts = -1");
  reject("scoring_func", "\"softmax\"", "scoring_func = 'softmax'", ErrorCode::kUnsupported);
  reject("topk_method", "\"greedy\"", "topk_method = 'greedy'", ErrorCode::kUnsupported);
  reject("hidden_act", "\"gelu\"", "hidden_act = 'gelu'", ErrorCode::kUnsupported);
  reject("rms_norm_eps", "-1e-6", "rms_norm_eps");
  reject("hc_eps", "-1", "hc_eps");
  reject("hc_sinkhorn_iters", "2147483647", "text_config.hc_sinkhorn_iters = 2147483647 exceeds");
}

TEST_CASE("model config: RoPE bases and YaRN betas that give non-finite tables", "[unit][config]") {
  reject("rope_theta", "-10000", "text_config.rope_theta = -10000 must be a finite number > 1");
  reject("rope_theta", "1", "text_config.rope_theta = 1 must be a finite number > 1");
  reject("rope_theta", "1e-400", "text_config.rope_theta = 0 must be a finite number > 1");
  reject("compress_rope_theta", "0", "text_config.compress_rope_theta = 0");
  reject("beta_fast", "-32", "text_config.rope_scaling.beta_fast = -32 must be >= 0");
  reject("beta_slow", "-1", "text_config.rope_scaling.beta_slow = -1 must be >= 0");
}

TEST_CASE("model config: integers past the field's range are refused, not truncated",
          "[unit][config]") {
  // 2^32 + 1 would become 1 layer, 2^32 + 8 a window of 8, [2^32] a compress ratio of 0.
  reject("num_hidden_layers", "4294967297",
         "text_config.num_hidden_layers = 4294967297 is outside [-2147483648, 2147483647]");
  reject("sliding_window", "4294967304", "text_config.sliding_window = 4294967304 is outside");
  reject("compress_ratios", "[0, 4294967296]",
         "text_config.compress_ratios[1] = 4294967296 is outside");
  reject("hidden_size", "-9223372036854775808", "text_config.hidden_size = -9223372036854775808");
  reject("gate_temp", "0", "gate_temp");
  reject("swiglu_limit", "-1", "swiglu_limit");
}

TEST_CASE("model config: rope_scaling rules", "[unit][config]") {
  reject("rope_scaling", R"({"rope_type": "linear", "factor": 2})", "rope_type = 'linear'",
         ErrorCode::kUnsupported);
  reject("rope_scaling",
         R"({"rope_type": "yarn", "factor": 0, "original_max_position_embeddings": 65536})",
         "rope_scaling.factor");
  reject("rope_scaling", R"({"rope_type": "yarn", "factor": 16})",
         "original_max_position_embeddings");
}

TEST_CASE("model config: token ids and quantization_config", "[unit][config]") {
  std::string j = tiny8_json();
  // Top-level keys come first in the file, so set_key hits the top-level
  // copies.
  expect_reject(set_key(j, "bos_token_id", "600"), ErrorCode::kInvalidArgument,
                "bos_token_id = 600 is outside the vocabulary");
  expect_reject(set_key(j, "eos_token_id", "-1"), ErrorCode::kInvalidArgument, "eos_token_id");
  expect_reject(set_key(j, "pad_token_id", "1000"), ErrorCode::kInvalidArgument, "pad_token_id");
  reject("quant_method", "\"awq\"", "quant_method = 'awq'", ErrorCode::kUnsupported);
  reject("scale_fmt", "\"fp32\"", "scale_fmt = 'fp32'", ErrorCode::kUnsupported);
  reject("expert_dtype", "\"int4\"", "expert_dtype = 'int4'", ErrorCode::kUnsupported);
  reject("weight_block_size", "[32]", "weight_block_size must be two positive integers");
}

TEST_CASE("model config: Engram rules", "[unit][config]") {
  reject("engram_layer_ids", "[2, 8]", "engram_layer_ids[1] = 8 is outside [0, 8)");
  reject("engram_layer_ids", "[5, 2]", "engram_layer_ids must be strictly increasing");
  reject("engram_num_embeddings", "[990]", "engram_num_embeddings has 1 entries");
  reject("engram_num_embeddings", "[990, 0]", "engram_num_embeddings[1] = 0 must be positive");
  reject("engram_max_ngram_size", "1", "engram_max_ngram_size = 1 must be >= 2");
  reject("engram_head_dim", "48", "engram_head_dim = 48 must be a positive multiple of 32");
  std::string j = set_key(tiny8_json(), "engram_pad_id", "700");
  expect_reject(set_key(j, "engram_pad_token_id", "700"), ErrorCode::kInvalidArgument,
                "engram_pad_token_id = 700 is outside the vocabulary");
}

TEST_CASE("model config: layer schedule rules", "[unit][config]") {
  reject("num_nextn_predict_layers", "-1", "num_nextn_predict_layers = -1");
  reject("compress_ratios", "[0, 2, 2, 2, 1, 1, 1]", "compress_ratios has 7 entries, expected");
  reject("compress_ratios", "[0, 2, 2, -2, 1, 1, 1, 1]", "compress_ratios[3] = -2");
  {
    std::string j = set_key(tiny8_json(), "num_nextn_predict_layers", "1");
    j = set_key(j, "compress_ratios", "[0, 2, 2, 2, 1, 1, 1, 1, 1]");
    expect_reject(j, ErrorCode::kInvalidArgument, "DSpark layers are SWA-only");
    j = set_key(j, "compress_ratios", "[0, 2, 2, 2, 1, 1, 1, 1, 0]");
    j = set_key(j, "dspark_target_layer_ids", "[5, 9]");
    expect_reject(j, ErrorCode::kInvalidArgument, "dspark_target_layer_ids[1] = 9");
  }
  reject("kv_source_layer_ids", "[1, 9]", "kv_source_layer_ids[1] = 9 is outside [0, 8)");
  reject("kv_source_layer_ids", "[4, 1]", "kv_source_layer_ids must be strictly increasing");
  reject("index_source_layer_ids", "[1, 4, 8]", "index_source_layer_ids[2] = 8");
  reject("candidate_source_layer_id", "8", "candidate_source_layer_id = 8 is outside");
  reject("candidate_source_layer_id", "6", "candidate_source_layer_id = 6 must identify a Full");
  reject("kv_source_layer_ids", "[0, 1, 4]", "names layer 0, whose compress_ratio is 0");
  reject("index_source_layer_ids", "[0, 1, 4, 6]", "names layer 0, whose compress_ratio is 0");
  // Layer 4 (ratio 1) loses its KV source: no preceding source with ratio 1.
  {
    std::string j = set_key(tiny8_json(), "kv_source_layer_ids", "[1]");
    j = set_key(j, "candidate_source_layer_id", "-1");
    expect_reject(j, ErrorCode::kInvalidArgument, "has no preceding KV source with the same ratio");
  }
  {  // Layer 4 a KV source but not an index source.
    std::string j = set_key(tiny8_json(), "index_source_layer_ids", "[1, 6]");
    j = set_key(j, "candidate_source_layer_id", "-1");
    expect_reject(j, ErrorCode::kInvalidArgument, "is a KV source but not an index source");
  }
  {  // Reindex layer 6 whose KV source 4 is not the candidate source.
    std::string j = set_key(tiny8_json(), "candidate_source_layer_id", "-1");
    expect_reject(j, ErrorCode::kInvalidArgument, "is a Reindex layer");
  }
}

TEST_CASE("model config: parse errors name the key and the file", "[unit][config]") {
  expect_reject("{not json", ErrorCode::kInvalidArgument, "config.json: not valid JSON");
  expect_reject("[1, 2]", ErrorCode::kInvalidArgument, "config.json: not a JSON object");
  reject("hidden_size", "\"96\"", "config.json: text_config.hidden_size must be an integer");
  reject("rope_theta", "\"x\"", "text_config.rope_theta must be a number");
  reject("norm_topk_prob", "1", "text_config.norm_topk_prob must be true or false");
  reject("hidden_act", "3", "text_config.hidden_act must be a string");
  reject("compress_ratios", "3", "text_config.compress_ratios must be an array of integers");
  reject("compress_ratios", "[0, \"2\"]", "text_config.compress_ratios[1] must be an integer");
  reject("rope_scaling", "3", "text_config.rope_scaling must be an object");
  const Result<ModelConfig> missing = ModelConfig::load("/nonexistent-dir");
  REQUIRE_FALSE(missing.is_ok());
  REQUIRE(missing.status().code() == ErrorCode::kNotFound);
  REQUIRE(missing.status().message().find("/nonexistent-dir/config.json") != std::string::npos);
}

TEST_CASE("model config: fixture configs derive the golden layer roles", "[unit][config]") {
  for (const char* name : {"tiny8", "tiny40"}) {
    const std::string dir = test::fixture(std::string("golden/") + name);
    Result<ModelConfig> cfg = ModelConfig::load(dir);
    REQUIRE(cfg.is_ok());
    simdjson::dom::parser parser;
    simdjson::dom::element golden = parser.load(dir + "/golden.json");
    simdjson::dom::array roles = golden["layer_roles"].get_array();
    REQUIRE(roles.size() == cfg->roles.size());
    size_t i = 0;
    for (simdjson::dom::element r : roles) {
      const LayerRole& got = cfg->roles[i++];
      INFO(name << " layer " << got.layer);
      REQUIRE(int64_t(r["layer"]) == got.layer);
      REQUIRE(int64_t(r["ratio"]) == got.ratio);
      REQUIRE(std::string(std::string_view(r["role"])) == attn_role_name(got.role));
      REQUIRE(bool(r["candidate_source"]) == got.candidate_source);
      REQUIRE(bool(r["engram"]) == got.engram);
    }
  }
}

}  // namespace
}  // namespace dsv41

namespace dsv41 {
namespace {

std::string with_vision(const std::string& body) {
  return set_key(tiny8_json(), "vision_config",
                 "{\"model_type\": \"deepseek_v41_vision\"" + body + "}");
}

TEST_CASE("model config: vision_config is read with the released defaults", "[unit][config]") {
  Result<ModelConfig> c = ModelConfig::parse(tiny8_json(), "config.json");
  REQUIRE(c.is_ok());
  REQUIRE(c->validate().is_ok());
  CHECK(c->has_vision);
  CHECK(c->vision.hidden_size == 1024);
  CHECK(c->vision.num_hidden_layers == 32);
  CHECK(c->vision.head_dim() == 64);
  CHECK(c->vision.min_pixels == 295936);
  CHECK(c->vision.max_wh_ratio == 0.0);  // null
  Result<ModelConfig> small = ModelConfig::parse(
      with_vision(", \"hidden_size\": 32, \"num_attention_heads\": 2, \"patch_size\": 2, "
                  "\"max_wh_ratio\": 2.5"),
      "config.json");
  REQUIRE(small.is_ok());
  CHECK(small->vision.hidden_size == 32);
  CHECK(small->vision.head_dim() == 16);
  CHECK(small->vision.patch_size == 2);
  CHECK(small->vision.max_image_tokens == 1024);  // absent: default
  CHECK(small->vision.max_wh_ratio == 2.5);
}

TEST_CASE("model config: vision_config rules name the key", "[unit][config]") {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "patch_size", "downsample_ratio"})
    expect_reject(with_vision(std::string(", \"") + key + "\": 0"), ErrorCode::kInvalidArgument,
                  std::string("vision_config.") + key + " = 0 must be positive");
  expect_reject(with_vision(", \"hidden_size\": 30, \"num_attention_heads\": 3"),
                ErrorCode::kInvalidArgument, "multiple of 4 (2D RoPE)");
  expect_reject(with_vision(", \"max_image_tokens\": 3"), ErrorCode::kInvalidArgument,
                "vision_config.max_image_tokens = 3");
  expect_reject(with_vision(", \"min_pixels\": -1"), ErrorCode::kInvalidArgument,
                "vision_config.min_pixels = -1");
  expect_reject(with_vision(", \"max_wh_ratio\": -2"), ErrorCode::kInvalidArgument,
                "vision_config.max_wh_ratio = -2");
  expect_reject(with_vision(", \"rope_theta\": 0"), ErrorCode::kInvalidArgument,
                "vision_config.rope_theta = 0");
  expect_reject(with_vision(", \"patch_size\": \"14\""), ErrorCode::kInvalidArgument,
                "vision_config.patch_size must be an integer");
  expect_reject(set_key(tiny8_json(), "image_token_id", "-1"), ErrorCode::kInvalidArgument,
                "image_token_id must be set when vision_config is present");
}

}  // namespace
}  // namespace dsv41
