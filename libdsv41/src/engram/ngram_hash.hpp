// Engram n-gram hash row ids (spec model-architecture.md §5.2 step 4). A position's ids depend
// only on the token history, so prefill, chunked prefill and decode all call ids_for() on the
// full history with the position range they need.
//
// Per absolute position t and Engram layer l, for look-back s = 0..N-1:
//   blocked_s = blocked_{s-1} or t < s or image[t - s]     (cumulative: once blocked, stays)
//   c_s = blocked_s ? map[pad] : map[token[t - s]]
//   P_s = c_s * mult[l][s]                                 (int64, cannot overflow)
//   rho_n = P_0 xor ... xor P_{n-1},  n = 2..N
//   id[l][t][(n-2)*heads + h] = rho_n mod prime[l][n-2][h] + offset[l][(n-2)*heads + h]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engram/primes.hpp"
#include "engram/token_map.hpp"

namespace dsv41::engram {

// The config keys that shape the hash (spec §1.2).
struct HashConfig {
  std::vector<int64_t> layer_ids;       // engram_layer_ids
  std::vector<int64_t> num_embeddings;  // engram_num_embeddings (rows per layer table)
  int64_t vocab_size = 0;               // engram_vocab_size: start of the prime search
  int64_t max_ngram_size = 0;           // engram_max_ngram_size (N)
  int64_t n_heads = 0;                  // engram_n_heads
  int64_t pad_token_id = 0;             // engram_pad_token_id (HF: engram_pad_id)
  int64_t compressed_vocab_size = 0;    // engram_compressed_vocab_size
};

class NgramHasher {
 public:
  // Derives primes, offsets and multipliers. Throws kInvalidArgument naming the config key when
  // the token map size differs from engram_compressed_vocab_size, the primes do not sum to
  // engram_num_embeddings, or the pad id is outside the token map.
  NgramHasher(const HashConfig& config, TokenMap token_map);

  int64_t n_layers() const { return layout_.n_layers; }
  int64_t n_cols() const { return layout_.n_cols(); }  // (N-1) * heads
  int64_t max_ngram_size() const { return max_ngram_; }
  int32_t pad_compressed_id() const { return pad_compressed_; }
  const PrimeLayout& layout() const { return layout_; }
  const std::vector<int64_t>& multipliers() const { return multipliers_; }  // [layers, N]
  const TokenMap& token_map() const { return token_map_; }

  // Row ids for positions [t0, t1) of `tokens` (the full history from position 0);
  // `is_image[t]` != 0 marks an image-span (DEAD) position; empty = no image positions.
  // Returns [n_layers, t1 - t0, n_cols]. Throws kInvalidArgument naming the position on a
  // token id outside the token map, a bad range, or an is_image of the wrong length.
  std::vector<int64_t> ids_for(std::span<const int32_t> tokens, std::span<const uint8_t> is_image,
                               int64_t t0, int64_t t1) const;

 private:
  PrimeLayout layout_;
  std::vector<int64_t> multipliers_;
  TokenMap token_map_;
  int64_t max_ngram_ = 0;
  int32_t pad_compressed_ = 0;
};

}  // namespace dsv41::engram
