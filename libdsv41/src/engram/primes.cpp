#include "engram/primes.hpp"

#include <fmt/format.h>

#include <unordered_set>

#include "core/check.hpp"

namespace dsv41::engram {
namespace {

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}

uint64_t pow_mod(uint64_t base, uint64_t exp, uint64_t m) {
  uint64_t result = 1 % m;
  base %= m;
  for (; exp != 0; exp >>= 1) {
    if (exp & 1u) result = mul_mod(result, base, m);
    base = mul_mod(base, base, m);
  }
  return result;
}

// The reference's search (HF-mod `_find_next_prime`): the smallest prime > start not yet used.
int64_t next_unused_prime(int64_t start, const std::unordered_set<int64_t>& used) {
  int64_t candidate = start + 1;
  while (!is_prime(static_cast<uint64_t>(candidate)) || used.count(candidate) != 0) {
    DSV41_CHECK(candidate < INT64_MAX, kInvalidArgument, "Engram prime search overflowed int64");
    ++candidate;
  }
  return candidate;
}

}  // namespace

bool is_prime(uint64_t n) {
  if (n < 2) return false;
  static constexpr uint64_t kBases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  for (uint64_t p : kBases) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int r = 0;
  for (; (d & 1u) == 0; d >>= 1) ++r;
  for (uint64_t a : kBases) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < r && composite; ++i) {
      x = mul_mod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

PrimeLayout find_primes(int64_t n_layers, int64_t max_ngram_size, int64_t n_heads,
                        int64_t engram_vocab_size) {
  DSV41_CHECK(n_layers >= 0, kInvalidArgument, "Engram: {} layers", n_layers);
  DSV41_CHECK(max_ngram_size >= 2, kInvalidArgument, "engram_max_ngram_size must be >= 2, found {}",
              max_ngram_size);
  DSV41_CHECK(n_heads >= 1, kInvalidArgument, "engram_n_heads must be >= 1, found {}", n_heads);
  DSV41_CHECK(engram_vocab_size >= 1, kInvalidArgument, "engram_vocab_size must be >= 1, found {}",
              engram_vocab_size);
  PrimeLayout out;
  out.n_layers = n_layers;
  out.n_orders = max_ngram_size - 1;
  out.n_heads = n_heads;
  std::unordered_set<int64_t> used;
  for (int64_t l = 0; l < n_layers; ++l) {
    int64_t total = 0;
    for (int64_t o = 0; o < out.n_orders; ++o) {
      // The reference restarts every n-gram order's search at engram_vocab_size - 1; the
      // `used` set is what makes the primes consecutive across orders and layers.
      int64_t current = engram_vocab_size - 1;
      for (int64_t h = 0; h < n_heads; ++h) {
        current = next_unused_prime(current, used);
        used.insert(current);
        out.primes.push_back(current);
        out.offsets.push_back(total);
        total += current;
      }
    }
    out.table_rows.push_back(total);
  }
  return out;
}

Status check_num_embeddings(const PrimeLayout& layout,
                            std::span<const int64_t> engram_num_embeddings) {
  if (static_cast<int64_t>(engram_num_embeddings.size()) != layout.n_layers) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("engram_num_embeddings has {} entries but engram_layer_ids has {}",
                              engram_num_embeddings.size(), layout.n_layers));
  }
  for (int64_t l = 0; l < layout.n_layers; ++l) {
    if (engram_num_embeddings[l] != layout.table_rows[l]) {
      return Status(
          ErrorCode::kInvalidArgument,
          fmt::format("engram_num_embeddings[{}] = {} but the bucket primes of Engram layer {} "
                      "sum to {} (spec model-architecture.md §5.2)",
                      l, engram_num_embeddings[l], l, layout.table_rows[l]));
    }
  }
  return Status::ok();
}

}  // namespace dsv41::engram
