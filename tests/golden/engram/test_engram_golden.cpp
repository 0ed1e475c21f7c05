// Engram against the tiny oracle cases (tests/fixtures/golden/{tiny40,tiny8}/README.md):
// token map, primes, offsets, multipliers and hash ids exactly; the gating op teacher-forced
// (input debug.H[l-1], output debug.engram_out.L{l}) to abs 1e-5.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "engram/engram_layer.hpp"
#include "engram/ngram_hash.hpp"
#include "engram/token_map.hpp"
#include "loader/checkpoint.hpp"
#include "loader/safetensors.hpp"
#include "support/fixtures.hpp"
#include "support/tolerance.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace dsv41;
using namespace dsv41::engram;

namespace {

struct Case {
  std::string dir;
  HashConfig hash;
  int64_t hidden = 0, hc = 0, head_dim = 0;
  float eps = 0;
  std::unique_ptr<SafetensorsFile> golden;

  explicit Case(const std::string& name) : dir(test::fixture("golden/" + name)) {
    simdjson::dom::parser parser;
    const simdjson::dom::element root = parser.load(dir + "/config.json");
    const simdjson::dom::element t = root["text_config"];
    for (int64_t v : t["engram_layer_ids"].get_array()) hash.layer_ids.push_back(v);
    for (int64_t v : t["engram_num_embeddings"].get_array()) hash.num_embeddings.push_back(v);
    hash.vocab_size = t["engram_vocab_size"].get_int64();
    hash.max_ngram_size = t["engram_max_ngram_size"].get_int64();
    hash.n_heads = t["engram_n_heads"].get_int64();
    hash.pad_token_id = t["engram_pad_token_id"].get_int64();
    hash.compressed_vocab_size = t["engram_compressed_vocab_size"].get_int64();
    hidden = t["hidden_size"].get_int64();
    hc = t["hc_mult"].get_int64();
    head_dim = t["engram_head_dim"].get_int64();
    eps = static_cast<float>(t["rms_norm_eps"].get_double().value());
    golden = SafetensorsFile::open(dir + "/golden.safetensors");
  }

  TensorView tensor(const std::string& name) const {
    const TensorInfo* info = golden->find_info(name);
    REQUIRE(info != nullptr);
    return golden->view(*info);
  }
  template <typename T>
  std::vector<T> raw(const std::string& name, DType dtype) const {
    const TensorView v = tensor(name);
    REQUIRE(v.dtype() == dtype);
    std::vector<T> out(static_cast<size_t>(v.numel()));
    std::memcpy(out.data(), v.data, v.nbytes());
    return out;
  }
  TokenMap token_map() const {
    const auto tok = Tokenizer::load(dir + "/tokenizer.json");
    return build_token_map(*tok);
  }
};

void check_constants(const char* name) {
  const Case c(name);
  const TokenMap map = c.token_map();
  CHECK(map.compressed == c.raw<int32_t>("engram.token_map", DType::kI32));
  CHECK(map.n_compressed == c.hash.compressed_vocab_size);
  const NgramHasher hasher(c.hash, map);
  CHECK(hasher.layout().primes == c.raw<int64_t>("engram.primes", DType::kI64));
  CHECK(hasher.layout().offsets == c.raw<int64_t>("engram.offsets", DType::kI64));
  CHECK(hasher.layout().table_rows == c.hash.num_embeddings);
  CHECK(hasher.multipliers() == c.raw<int64_t>("engram.multipliers", DType::kI64));
}

void check_hash_ids(const char* name) {
  const Case c(name);
  const NgramHasher hasher(c.hash, c.token_map());
  const std::vector<int32_t> ids = c.raw<int32_t>("prompt1.input_ids", DType::kI32);
  const std::vector<int32_t> want = c.raw<int32_t>("debug.engram_hash_ids", DType::kI32);
  const int64_t T = static_cast<int64_t>(ids.size());
  const std::vector<int64_t> got = hasher.ids_for(ids, {}, 0, T);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("flat index " << i << " (layer slot, position, col) of [" << hasher.n_layers() << ", " << T
                       << ", " << hasher.n_cols() << "]");
    REQUIRE(got[i] == want[i]);
  }
  // Decode-style: one position at a time over the growing history, and a chunked split.
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int64_t> step = hasher.ids_for(
        std::span<const int32_t>(ids.data(), static_cast<size_t>(t + 1)), {}, t, t + 1);
    for (int64_t l = 0; l < hasher.n_layers(); ++l)
      for (int64_t j = 0; j < hasher.n_cols(); ++j)
        REQUIRE(step[l * hasher.n_cols() + j] == want[(l * T + t) * hasher.n_cols() + j]);
  }
}

void check_gating(const char* name, ThreadPool* pool) {
  const Case c(name);
  const auto ckpt = Checkpoint::open(c.dir);
  const std::vector<int32_t> hash = c.raw<int32_t>("debug.engram_hash_ids", DType::kI32);
  const std::vector<float> all_h = tensor_to_f32(c.tensor("debug.H"));
  const int64_t T = c.tensor("prompt1.input_ids").numel();
  const int64_t n_cols = (c.hash.max_ngram_size - 1) * c.hash.n_heads;
  const int64_t stream = T * c.hc * c.hidden;
  for (size_t slot = 0; slot < c.hash.layer_ids.size(); ++slot) {
    const int64_t layer = c.hash.layer_ids[slot];
    INFO(name << " Engram layer " << layer);
    REQUIRE(layer >= 1);
    const EngramDims dims{c.hidden, c.hc, c.head_dim, n_cols, c.hash.num_embeddings[slot]};
    const EngramWeights w = load_engram_weights(*ckpt, layer, dims);
    std::vector<float> H(all_h.begin() + (layer - 1) * stream, all_h.begin() + layer * stream);
    const std::vector<int64_t> ids(hash.begin() + slot * T * n_cols,
                                   hash.begin() + (slot + 1) * T * n_cols);
    apply_engram(w, H, ids, {}, T, c.eps, pool);
    const std::vector<float> want =
        tensor_to_f32(c.tensor("debug.engram_out.L" + std::to_string(layer)));
    REQUIRE(want.size() == H.size());
    test::require_close(std::string(name) + " engram_out.L" + std::to_string(layer), H, want,
                        H.size(), 1e-5);
  }
}

}  // namespace

TEST_CASE("engram: tiny40: token map, primes, offsets, multipliers", "[golden][engram]") {
  check_constants("tiny40");
}
TEST_CASE("engram: tiny8: token map, primes, offsets, multipliers", "[golden][engram]") {
  check_constants("tiny8");
}
TEST_CASE("engram: tiny40: hash ids of prompt1", "[golden][engram]") { check_hash_ids("tiny40"); }
TEST_CASE("engram: tiny8: hash ids of prompt1", "[golden][engram]") { check_hash_ids("tiny8"); }
TEST_CASE("engram: tiny40: gating op, layers 1 and 14", "[golden][engram]") {
  check_gating("tiny40", nullptr);
}
TEST_CASE("engram: tiny8: gating op, layers 2 and 5 (thread pool)", "[golden][engram]") {
  ThreadPool pool(2);
  check_gating("tiny8", &pool);
}
