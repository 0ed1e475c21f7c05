// Loading a model through the released multi-shard layout (Checkpoint::open +
// ModelWeights::bind
// + Transformer::load) and the named errors for bad models: an unexpected
// tensor, a missing tensor, a shape that disagrees with config.json, Engram
// constants that disagree with the tokenizer, a missing tokenizer.json.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.hpp"
#include "loader/checkpoint.hpp"
#include "model/model_weights.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"

namespace dsv41 {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

// A scratch copy of the tiny8 model folder, removed at scope exit.
struct ScratchModel {
  fs::path dir;
  ScratchModel() {
    dir = fs::temp_directory_path() /
          ("dsv41_model_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(test::fixture("golden/tiny8"))) {
      const std::string n = e.path().filename().string();
      if (n.rfind("golden", 0) != 0 && n != "README.md") fs::copy_file(e.path(), dir / n);
    }
  }
  ~ScratchModel() { fs::remove_all(dir); }
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::string path() const { return dir.string(); }
  std::string index() const { return read_text(dir / "model.safetensors.index.json"); }
  void set_index(const std::string& s) const {
    write_text(dir / "model.safetensors.index.json", s);
  }
  // Adds shard `extra.safetensors` with one F32 [4] tensor `name` and lists it
  // in the index.
  void add_tensor(const std::string& name) const {
    const float v[4] = {1, 2, 3, 4};
    write_safetensors((dir / "extra.safetensors").string(),
                      {{name, DType::kF32, {4}, {reinterpret_cast<const uint8_t*>(v), sizeof v}}});
    std::string idx = index();
    const std::string key = "\"weight_map\": {";
    idx.insert(idx.find(key) + key.size(), "\n    \"" + name + "\": \"extra.safetensors\",");
    set_index(idx);
  }
  // Replaces `"key": old` by `"key": value` in config.json (first occurrence).
  void set_config(const std::string& key, const std::string& old, const std::string& value) const {
    std::string c = read_text(dir / "config.json");
    const std::string from = "\"" + key + "\": " + old;
    const size_t at = c.find(from);
    REQUIRE(at != std::string::npos);
    c.replace(at, from.size(), "\"" + key + "\": " + value);
    write_text(dir / "config.json", c);
  }
};

// Runs Transformer::load and returns the error message ("" when it loads).
std::string load_error(const std::string& dir) {
  try {
    Transformer::load(dir, 1);
  } catch (const detail::Failure& f) {
    return f.message();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("model: tiny8 and tiny40 load through the sharded index, every tensor used",
          "[golden][model]") {
  for (const char* name : {"tiny8", "tiny40"}) {
    const std::string dir = test::fixture(std::string("golden/") + name);
    auto ck = Checkpoint::open(dir);
    REQUIRE(ck->shard_count() == 2);
    Result<ModelConfig> cfg = ModelConfig::load(dir);
    REQUIRE(cfg.is_ok());
    auto w = ModelWeights::bind(*ck, *cfg);
    REQUIRE(w->layers.size() == cfg->roles.size());
    for (const IgnoredGroup& g : w->ignored) REQUIRE(g.count == 0);
    for (size_t l = 0; l < w->layers.size(); ++l)
      REQUIRE((w->layers[l].engram != nullptr) == cfg->roles[l].engram);
  }
}

TEST_CASE("model: an unexpected tensor is an error naming it and its file", "[golden][model]") {
  ScratchModel m;
  m.add_tensor("layers.0.ffn.bogus");
  const std::string e = load_error(m.path());
  INFO(e);
  REQUIRE(contains(e, "'layers.0.ffn.bogus' is not used"));
  REQUIRE(contains(e, "extra.safetensors"));
}

TEST_CASE("model: a tensor of another role (a gate on the ratio-1 compressor) is unexpected",
          "[golden][model]") {
  ScratchModel m;
  m.add_tensor("layers.4.attn.compressor.wgate.weight");
  const std::string e = load_error(m.path());
  INFO(e);
  REQUIRE(contains(e, "'layers.4.attn.compressor.wgate.weight' is not used"));
}

TEST_CASE("model: DSpark / vision tensors are ignored and counted", "[golden][model]") {
  ScratchModel m;
  m.add_tensor("mtp.0.attn_norm.weight");
  REQUIRE(load_error(m.path()).empty());
  auto ck = Checkpoint::open(m.path());
  Result<ModelConfig> cfg = ModelConfig::load(m.path());
  REQUIRE(cfg.is_ok());
  auto w = ModelWeights::bind(*ck, *cfg);
  REQUIRE(w->ignored[0].prefix == "mtp.");
  REQUIRE(w->ignored[0].count == 1);
  REQUIRE(w->ignored[0].bytes == 16);
}

TEST_CASE("model: a missing tensor is an error naming it", "[golden][model]") {
  ScratchModel m;
  std::string idx = m.index();
  const std::string line =
      "    \"layers.3.ffn.gate.bias\": \"model-00001-of-00002.safetensors\",\n";
  const size_t at = idx.find(line);
  REQUIRE(at != std::string::npos);
  idx.erase(at, line.size());
  m.set_index(idx);
  const std::string e = load_error(m.path());
  INFO(e);
  REQUIRE(contains(e, "layers.3.ffn.gate.bias"));
}

TEST_CASE("model: a tensor shape that disagrees with config.json is named", "[golden][model]") {
  ScratchModel m;
  m.set_config("moe_intermediate_size", "64", "32");
  const std::string e = load_error(m.path());
  INFO(e);
  REQUIRE(contains(e, "layers.0.ffn.shared_experts.w1.weight"));
}

TEST_CASE("model: Engram constants are checked against the tokenizer at load", "[golden][model]") {
  SECTION("compressed vocab size != token map size") {
    ScratchModel m;
    m.set_config("engram_compressed_vocab_size", "491", "490");
    const std::string e = load_error(m.path());
    INFO(e);
    REQUIRE(contains(e, "engram_compressed_vocab_size"));
  }
  SECTION("tokenizer.json missing") {
    ScratchModel m;
    fs::remove(m.dir / "tokenizer.json");
    const std::string e = load_error(m.path());
    INFO(e);
    REQUIRE(contains(e, "tokenizer.json"));
  }
  SECTION("table rows != sum of primes") {
    ScratchModel m;
    m.set_config("engram_vocab_size", "150", "200");
    const std::string e = load_error(m.path());
    INFO(e);
    REQUIRE(contains(e, "engram_num_embeddings"));
  }
}

TEST_CASE("model: forward rejects bad token ids and flag counts", "[golden][model]") {
  auto m = Transformer::load(test::fixture("golden/tiny8"), 1);
  SequenceState st = m->new_sequence();
  const int32_t bad[2] = {0, 600};
  REQUIRE_THROWS_WITH(m->forward(st, bad), Catch::Contains("token id 600 is outside"));
  const int32_t ok[2] = {0, 5};
  const uint8_t flags[1] = {0};
  SequenceState st2 = m->new_sequence();
  REQUIRE_THROWS_WITH(m->forward(st2, ok, flags), Catch::Contains("1 image flags for 2 tokens"));
  REQUIRE_THROWS_WITH(m->forward(st2, {}), Catch::Contains("no tokens"));
}

}  // namespace
}  // namespace dsv41
