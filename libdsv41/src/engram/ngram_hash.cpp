#include "engram/ngram_hash.hpp"

#include "core/check.hpp"
#include "engram/multipliers.hpp"

namespace dsv41::engram {

NgramHasher::NgramHasher(const HashConfig& config, TokenMap token_map)
    : token_map_(std::move(token_map)), max_ngram_(config.max_ngram_size) {
  DSV41_CHECK(config.compressed_vocab_size == token_map_.n_compressed, kInvalidArgument,
              "engram_compressed_vocab_size is {} but the tokenizer-derived compressed token map "
              "has {} ids (spec model-architecture.md §5.2.1)",
              config.compressed_vocab_size, token_map_.n_compressed);
  DSV41_CHECK(config.pad_token_id >= 0 &&
                  config.pad_token_id < static_cast<int64_t>(token_map_.compressed.size()),
              kInvalidArgument, "engram_pad_token_id {} is outside the vocabulary of {} tokens",
              config.pad_token_id, token_map_.compressed.size());
  pad_compressed_ = token_map_.compressed[static_cast<size_t>(config.pad_token_id)];
  layout_ = find_primes(static_cast<int64_t>(config.layer_ids.size()), config.max_ngram_size,
                        config.n_heads, config.vocab_size);
  const Status rows = check_num_embeddings(layout_, config.num_embeddings);
  DSV41_CHECK(rows.is_ok(), kInvalidArgument, "{}", rows.message());
  multipliers_ = hash_multipliers(config.layer_ids, config.max_ngram_size, token_map_.n_compressed);
}

std::vector<int64_t> NgramHasher::ids_for(std::span<const int32_t> tokens,
                                          std::span<const uint8_t> is_image, int64_t t0,
                                          int64_t t1) const {
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  DSV41_CHECK(0 <= t0 && t0 <= t1 && t1 <= n_tokens, kInvalidArgument,
              "Engram hash: positions [{}, {}) outside the history of {} tokens", t0, t1, n_tokens);
  DSV41_CHECK(is_image.empty() || is_image.size() == tokens.size(), kInvalidArgument,
              "Engram hash: {} image flags for {} tokens", is_image.size(), tokens.size());
  const int64_t vocab = static_cast<int64_t>(token_map_.compressed.size());
  const int64_t first = t0 - (max_ngram_ - 1) > 0 ? t0 - (max_ngram_ - 1) : 0;
  for (int64_t t = first; t < t1; ++t) {
    DSV41_CHECK(tokens[t] >= 0 && tokens[t] < vocab, kInvalidArgument,
                "Engram hash: token id {} at position {} is outside the vocabulary of {}",
                tokens[t], t, vocab);
  }
  const int64_t n_pos = t1 - t0, cols = n_cols(), heads = layout_.n_heads;
  std::vector<int64_t> out(static_cast<size_t>(layout_.n_layers * n_pos * cols));
  std::vector<int64_t> compressed(static_cast<size_t>(max_ngram_));
  for (int64_t t = t0; t < t1; ++t) {
    bool blocked = false;
    for (int64_t s = 0; s < max_ngram_; ++s) {
      blocked = blocked || t < s || (!is_image.empty() && is_image[t - s] != 0);
      compressed[s] = blocked ? pad_compressed_ : token_map_.compressed[tokens[t - s]];
    }
    for (int64_t l = 0; l < layout_.n_layers; ++l) {
      const int64_t* mult = &multipliers_[l * max_ngram_];
      int64_t* row = &out[(l * n_pos + (t - t0)) * cols];
      int64_t rolling = compressed[0] * mult[0];
      for (int64_t n = 1; n < max_ngram_; ++n) {
        rolling ^= compressed[n] * mult[n];  // both factors >= 0: the xor stays >= 0
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t col = (n - 1) * heads + h;
          row[col] = rolling % layout_.prime(l, col) + layout_.offset(l, col);
        }
      }
    }
  }
  return out;
}

}  // namespace dsv41::engram
