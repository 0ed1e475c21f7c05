// bench/synthetic with Engram: a generated tokenizer.json of the geometry's vocabulary, the prime
// layout and compressed map derived from it (synthetic_engram.hpp); the tiny checkpoint loads
// through Transformer::load (the hasher's load-time checks pass, every Engram tensor is bound) and
// its forward stays finite and differs from the same weights without Engram. Bad inputs are named.
// The expert pool: a router wider than the stored experts, expert e binding expert e % pool.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engram/primes.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"
#include "synthetic/synthetic_checkpoint.hpp"
#include "synthetic/synthetic_engram.hpp"
#include "synthetic/synthetic_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"
#include "unit/base/temp_dir.hpp"

namespace dsv41 {
namespace {

namespace fs = std::filesystem;
using synth::SyntheticGeometry;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string base_tokenizer() {
  return read_text(test::fixture("golden/tokenizer/tiny_tokenizer.json"));
}

std::vector<float> forward5(const std::string& dir) {
  auto m = Transformer::load(dir, 2);
  SequenceState st = m->new_sequence();
  const std::vector<int32_t> ids = {5, 77, 300, 2, 599};
  return m->forward(st, ids);
}

}  // namespace

TEST_CASE("synthetic tokenizer: the requested ids, bytes then merges then placeholders", "[unit]") {
  const std::string base = base_tokenizer();
  for (int64_t n : {256, 600, 5000}) {
    const std::unique_ptr<Tokenizer> tok =
        Tokenizer::from_json(synth::synthetic_tokenizer_json(base, n), "synthetic");
    INFO("n_ids " << n);
    REQUIRE(static_cast<int64_t>(tok->vocab_size()) == n);
    const std::string text = "Engram hashes n-grams of compressed ids.";
    REQUIRE(tok->decode(tok->encode(text, false)) == text);
  }
  REQUIRE_THROWS_WITH(synth::synthetic_tokenizer_json(base, 255),
                      Catch::Contains("255 ids, fewer than the 256 byte tokens"));
  REQUIRE_THROWS_WITH(synth::synthetic_tokenizer_json("{\"model\": {}}", 600),
                      Catch::Contains("no \"normalizer\" .. \"model\" sections"));
}

TEST_CASE("synthetic Engram tiny checkpoint: loads, forward finite, Engram changes the logits",
          "[unit]") {
  SyntheticGeometry g = SyntheticGeometry::tiny();
  const std::vector<float> plain = [&] {
    test::TempDir d;
    synth::write_synthetic_checkpoint(d.path(), g, 7);
    return forward5(d.path());
  }();
  const std::string tok = synth::synthetic_tokenizer_json(base_tokenizer(), g.vocab_size);
  synth::add_engram(&g, tok);
  REQUIRE(g.engram.layer_ids == std::vector<int>{2, 5});
  const engram::PrimeLayout primes = engram::find_primes(2, 3, 3, 150);
  REQUIRE(g.engram.num_embeddings == primes.table_rows);
  REQUIRE(g.engram.compressed_vocab_size > 256);  // the byte tokens alone map to distinct keys
  REQUIRE(g.engram.compressed_vocab_size <= g.vocab_size);
  REQUIRE(synth::engram_table_bytes(g) ==
          static_cast<uint64_t>(primes.table_rows[0] + primes.table_rows[1]) * (32 + 1));

  test::TempDir d;
  synth::write_synthetic_checkpoint(d.path(), g, 7, {}, tok);
  REQUIRE(read_text(d.file("tokenizer.json")) == tok);
  auto m = Transformer::load(d.path(), 2);  // binds layers.{2,5}.engram.*, checks the map
  REQUIRE(m->hasher() != nullptr);
  const std::vector<float> with = forward5(d.path());
  REQUIRE(with.size() == plain.size());
  double diff = 0.0;
  for (size_t i = 0; i < with.size(); ++i) {
    INFO("logit " << i);
    REQUIRE(std::isfinite(with[i]));
    diff = std::max(diff, std::fabs(double(with[i]) - plain[i]));
  }
  INFO("max |logits with Engram - without| " << diff);
  REQUIRE(diff > 1e-3);

  // Rewritten without Engram: the stale tokenizer.json goes.
  synth::write_synthetic_checkpoint(d.path(), SyntheticGeometry::tiny(), 7);
  REQUIRE_FALSE(fs::exists(d.file("tokenizer.json")));
}

TEST_CASE("synthetic Engram: bad inputs are named", "[unit]") {
  SyntheticGeometry g = SyntheticGeometry::tiny();
  const std::string base = base_tokenizer();
  REQUIRE_THROWS_WITH(
      synth::add_engram(&g, synth::synthetic_tokenizer_json(base, 700)),
      Catch::Contains("the tokenizer has 700 ids, the geometry's vocab_size is 600"));
  SyntheticGeometry two = SyntheticGeometry::tiny();
  two.num_hidden_layers = 2;
  two.compress_ratios.resize(2);
  REQUIRE_THROWS_WITH(synth::add_engram(&two, synth::synthetic_tokenizer_json(base, 600)),
                      Catch::Contains("no Engram layer below num_hidden_layers = 2"));
  synth::add_engram(&g, synth::synthetic_tokenizer_json(base, 600));
  test::TempDir d;
  REQUIRE_THROWS_WITH(synth::write_synthetic_checkpoint(d.path(), g, 7),
                      Catch::Contains("Engram layers need a tokenizer.json"));
}

TEST_CASE("synthetic expert pool: a wide router over a stored pool, expert e runs e % pool",
          "[unit]") {
  SyntheticGeometry g = SyntheticGeometry::tiny();
  g.expert_pool = g.n_routed_experts;  // 4 stored
  g.n_routed_experts = 8;              // 8-wide router
  test::TempDir d;
  synth::write_synthetic_checkpoint(d.path(), g, 7);
  REQUIRE(read_text(d.file("config.json")).find("\"synthetic_expert_pool\": 4") !=
          std::string::npos);
  auto m = Transformer::load(d.path(), 2);  // nothing left over, nothing missing
  REQUIRE(m->config().text.synthetic_expert_pool == 4);
  const Checkpoint& ck = m->checkpoint();
  REQUIRE(ck.has("layers.0.ffn.experts.3.w1.weight"));
  REQUIRE_FALSE(ck.has("layers.0.ffn.experts.4.w1.weight"));
  for (const auto& layer : m->weights().layers) {
    const auto& ex = layer.ffn.experts;
    REQUIRE(ex.size() == 8u);
    REQUIRE(layer.ffn.gate.size() == 8u * static_cast<size_t>(g.hidden_size));
    for (int e = 4; e < 8; ++e) {
      INFO("expert " << e);
      REQUIRE(ex[e].w1.weight_bytes() == ex[e - 4].w1.weight_bytes());
      REQUIRE(ex[e].w2.weight_bytes() == ex[e - 4].w2.weight_bytes());
      REQUIRE(ex[e].w3.weight_bytes() == ex[e - 4].w3.weight_bytes());
    }
  }
  SequenceState st = m->new_sequence();
  const std::vector<int32_t> ids = {5, 77, 300, 2, 599};
  for (float x : m->forward(st, ids)) REQUIRE(std::isfinite(x));

  SyntheticGeometry bad = g;
  bad.expert_pool = 9;
  REQUIRE_THROWS_WITH(synth::synthetic_tensors(bad),
                      Catch::Contains("expert_pool 9 is outside [0, n_routed_experts = 8]"));
  synth::SyntheticExl3 x;
  x.enabled = true;
  REQUIRE_THROWS_WITH(synth::synthetic_tensors(g, x),
                      Catch::Contains("expert_pool 4 with EXL3 banks"));
}

}  // namespace dsv41
