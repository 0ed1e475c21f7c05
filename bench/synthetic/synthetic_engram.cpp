#include "synthetic/synthetic_engram.hpp"

#include <vector>

#include "core/check.hpp"
#include "engram/primes.hpp"
#include "engram/token_map.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dsv41::synth {

void add_engram(SyntheticGeometry* g, const std::string& tokenizer_json, int64_t vocab_start) {
  SyntheticGeometry::Engram& e = g->engram;
  const bool tiny = g->hidden_size < 1024;
  e = SyntheticGeometry::Engram{};
  for (int l : tiny ? std::vector<int>{2, 5} : std::vector<int>{1, 14})
    if (l < g->num_hidden_layers) e.layer_ids.push_back(l);
  DSV41_CHECK(!e.layer_ids.empty(), kInvalidArgument,
              "synthetic Engram: no Engram layer below num_hidden_layers = {}",
              g->num_hidden_layers);
  e.vocab_size = tiny ? 150 : vocab_start;
  e.max_ngram_size = tiny ? 3 : 4;
  e.n_heads = tiny ? 3 : 8;
  e.head_dim = tiny ? 32 : 256;
  e.pad_token_id = 2;
  const engram::PrimeLayout primes = engram::find_primes(static_cast<int64_t>(e.layer_ids.size()),
                                                         e.max_ngram_size, e.n_heads, e.vocab_size);
  e.num_embeddings = primes.table_rows;
  // The map exactly as Transformer::load's hasher builds it (model/transformer.cpp): every id
  // of the vocabulary decoded alone.
  const std::unique_ptr<Tokenizer> tok = Tokenizer::from_json(tokenizer_json, "synthetic");
  DSV41_CHECK(static_cast<int64_t>(tok->vocab_size()) == g->vocab_size, kInvalidArgument,
              "synthetic Engram: the tokenizer has {} ids, the geometry's vocab_size is {}",
              tok->vocab_size(), g->vocab_size);
  const engram::TokenMap map = engram::build_token_map(
      static_cast<int32_t>(g->vocab_size),
      [&](int32_t id) {
        const int32_t one[1] = {id};
        return tok->decode(one);
      },
      [&](int32_t id) { return tok->token_string(id); });
  e.compressed_vocab_size = map.n_compressed;
}

uint64_t engram_table_bytes(const SyntheticGeometry& g) {
  uint64_t bytes = 0;
  for (int64_t rows : g.engram.num_embeddings)
    bytes += static_cast<uint64_t>(rows) * (g.engram.head_dim + g.engram.head_dim / 32);
  return bytes;
}

}  // namespace dsv41::synth
