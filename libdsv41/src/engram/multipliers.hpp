// Engram hash multipliers (spec model-architecture.md §5.2 step 3): for Engram layer id l,
// draw max_ngram_size values v from numpy default_rng(10007 * l).integers(0, bound) with
// bound = max(1, (2^63 - 1) // compressed_vocab_size // 2), and use 2v + 1 (odd, and small
// enough that compressed_id * multiplier cannot overflow int64).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv41::engram {

inline constexpr int64_t kLayerSeedPrime = 10007;

// max(1, (INT64_MAX / compressed_vocab_size) / 2); throws kInvalidArgument when the size < 1.
int64_t multiplier_bound(int64_t compressed_vocab_size);

// [layer_ids.size(), max_ngram_size] row-major. `layer_ids` are the model layer indices
// (engram_layer_ids, e.g. 1 and 14), not positions in that list.
std::vector<int64_t> hash_multipliers(std::span<const int64_t> layer_ids, int64_t max_ngram_size,
                                      int64_t compressed_vocab_size);

}  // namespace dsv41::engram
