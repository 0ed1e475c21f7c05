#include "engram/multipliers.hpp"

#include <limits>

#include "core/check.hpp"
#include "engram/numpy_pcg64.hpp"

namespace dsv41::engram {

int64_t multiplier_bound(int64_t compressed_vocab_size) {
  DSV41_CHECK(compressed_vocab_size >= 1, kInvalidArgument,
              "engram_compressed_vocab_size must be >= 1, found {}", compressed_vocab_size);
  const int64_t bound = (std::numeric_limits<int64_t>::max() / compressed_vocab_size) / 2;
  return bound < 1 ? 1 : bound;
}

std::vector<int64_t> hash_multipliers(std::span<const int64_t> layer_ids, int64_t max_ngram_size,
                                      int64_t compressed_vocab_size) {
  DSV41_CHECK(max_ngram_size >= 1, kInvalidArgument, "engram_max_ngram_size must be >= 1, found {}",
              max_ngram_size);
  const int64_t bound = multiplier_bound(compressed_vocab_size);
  std::vector<int64_t> out;
  out.reserve(layer_ids.size() * static_cast<size_t>(max_ngram_size));
  for (int64_t layer_id : layer_ids) {
    DSV41_CHECK(layer_id >= 0 && layer_id <= std::numeric_limits<int64_t>::max() / kLayerSeedPrime,
                kInvalidArgument, "engram_layer_ids entry {} is out of range", layer_id);
    NumpyPcg64 rng(static_cast<uint64_t>(kLayerSeedPrime * layer_id));
    for (int64_t v : rng.integers(0, bound, static_cast<size_t>(max_ngram_size)))
      out.push_back(2 * v + 1);
  }
  return out;
}

}  // namespace dsv41::engram
