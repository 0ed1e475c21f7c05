// Engram bucket primes and row offsets (spec model-architecture.md §5.2 step 2).
// For each Engram layer (config order), n-gram order n = 2..N and head h: the next prime above
// engram_vocab_size - 1 that no earlier (layer, n, h) took. Released: 48 primes above 16,000,000,
// per-layer sums 384,006,168 and 384,016,682 (= engram_num_embeddings).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dsv41/status.hpp"

namespace dsv41::engram {

// Deterministic for every 64-bit n (Miller-Rabin with the first 12 prime bases).
bool is_prime(uint64_t n);

struct PrimeLayout {
  int64_t n_layers = 0;
  int64_t n_orders = 0;  // max_ngram_size - 1 (n = 2..N)
  int64_t n_heads = 0;
  std::vector<int64_t> primes;      // [n_layers, n_orders, n_heads]
  std::vector<int64_t> offsets;     // [n_layers, n_orders * n_heads]: prefix sums inside a layer
  std::vector<int64_t> table_rows;  // [n_layers]: sum of the layer's primes

  int64_t n_cols() const { return n_orders * n_heads; }
  int64_t prime(int64_t layer, int64_t col) const { return primes[layer * n_cols() + col]; }
  int64_t offset(int64_t layer, int64_t col) const { return offsets[layer * n_cols() + col]; }
};

// Throws kInvalidArgument on n_layers < 0, max_ngram_size < 2, n_heads < 1, vocab_size < 1.
PrimeLayout find_primes(int64_t n_layers, int64_t max_ngram_size, int64_t n_heads,
                        int64_t engram_vocab_size);

// Ok iff engram_num_embeddings[l] == layout.table_rows[l] for every layer; otherwise an
// kInvalidArgument Status naming `engram_num_embeddings`, the layer index, expected and found.
Status check_num_embeddings(const PrimeLayout& layout,
                            std::span<const int64_t> engram_num_embeddings);

}  // namespace dsv41::engram
