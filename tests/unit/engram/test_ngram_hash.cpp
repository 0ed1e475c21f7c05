// n-gram hash rules (spec model-architecture.md §5.2 step 4): pad below position 0, DEAD
// (image-span) look-back, cumulative blocking, n-major/head-minor columns, incremental ranges.
#include <array>
#include <catch2/catch.hpp>
#include <vector>

#include "core/check.hpp"
#include "engram/ngram_hash.hpp"

using namespace dsv41::engram;

namespace {

// Layer id 1, N = 3, 2 heads, engram_vocab_size 10: primes 11, 13 (n=2) and 17, 19 (n=3),
// offsets 0, 11, 24, 41, 60 rows. Token map over 5 ids: tokens 1 and 3 share compressed id 1;
// the pad token (2) maps to compressed id 2.
HashConfig small_config() {
  HashConfig c;
  c.layer_ids = {1};
  c.num_embeddings = {60};
  c.vocab_size = 10;
  c.max_ngram_size = 3;
  c.n_heads = 2;
  c.pad_token_id = 2;
  c.compressed_vocab_size = 4;
  return c;
}

TokenMap small_map() { return TokenMap{{0, 1, 2, 1, 3}, 4}; }

// The row of one position from its three compressed look-back ids, written out by hand.
std::array<int64_t, 4> expected_row(const NgramHasher& h, int64_t c0, int64_t c1, int64_t c2) {
  const std::vector<int64_t>& m = h.multipliers();
  const int64_t rho2 = (c0 * m[0]) ^ (c1 * m[1]);
  const int64_t rho3 = rho2 ^ (c2 * m[2]);
  return {rho2 % 11, rho2 % 13 + 11, rho3 % 17 + 24, rho3 % 19 + 41};
}

std::array<int64_t, 4> row_of(const std::vector<int64_t>& ids, int64_t t) {
  return {ids[t * 4], ids[t * 4 + 1], ids[t * 4 + 2], ids[t * 4 + 3]};
}

}  // namespace

TEST_CASE("engram: hasher layout for the small config", "[unit][engram]") {
  const NgramHasher h(small_config(), small_map());
  CHECK(h.n_cols() == 4);
  CHECK(h.pad_compressed_id() == 2);
  CHECK(h.layout().primes == std::vector<int64_t>{11, 13, 17, 19});
  CHECK(h.layout().offsets == std::vector<int64_t>{0, 11, 24, 41});
  REQUIRE(h.multipliers().size() == 3);
  for (int64_t m : h.multipliers()) CHECK(m % 2 == 1);
}

TEST_CASE("engram: pad below position 0", "[unit][engram]") {
  const NgramHasher h(small_config(), small_map());
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 0};
  const std::vector<int64_t> ids = h.ids_for(tokens, {}, 0, 5);
  REQUIRE(ids.size() == 5 * 4);
  CHECK(row_of(ids, 0) == expected_row(h, 1, 2, 2));
  CHECK(row_of(ids, 1) == expected_row(h, 1, 1, 2));
  CHECK(row_of(ids, 2) == expected_row(h, 3, 1, 1));
  CHECK(row_of(ids, 3) == expected_row(h, 1, 3, 1));
  CHECK(row_of(ids, 4) == expected_row(h, 0, 1, 3));
}

TEST_CASE("engram: DEAD image positions block all further look-back", "[unit][engram]") {
  const NgramHasher h(small_config(), small_map());
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 0};
  const std::vector<uint8_t> image = {0, 1, 0, 0, 0};
  const std::vector<int64_t> ids = h.ids_for(tokens, image, 0, 5);
  CHECK(row_of(ids, 0) == expected_row(h, 1, 2, 2));
  CHECK(row_of(ids, 1) == expected_row(h, 2, 2, 2));  // the DEAD token itself hashes as pad
  CHECK(row_of(ids, 2) == expected_row(h, 3, 2, 2));  // position 0 is live but cut off
  CHECK(row_of(ids, 3) == expected_row(h, 1, 3, 2));
  CHECK(row_of(ids, 4) == expected_row(h, 0, 1, 3));  // the window no longer reaches it
}

TEST_CASE("engram: ranges and single-token steps give the same ids as one pass", "[unit][engram]") {
  const NgramHasher h(small_config(), small_map());
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 0, 2, 2, 4};
  const std::vector<uint8_t> image = {0, 0, 0, 1, 1, 0, 0, 0};
  const std::vector<int64_t> all = h.ids_for(tokens, image, 0, 8);
  const std::vector<int64_t> tail = h.ids_for(tokens, image, 3, 8);
  CHECK(std::vector<int64_t>(all.begin() + 3 * 4, all.end()) == tail);
  for (int64_t t = 0; t < 8; ++t) {
    const std::span<const int32_t> prefix(tokens.data(), static_cast<size_t>(t + 1));
    const std::span<const uint8_t> prefix_image(image.data(), static_cast<size_t>(t + 1));
    CHECK(h.ids_for(prefix, prefix_image, t, t + 1) ==
          std::vector<int64_t>(all.begin() + t * 4, all.begin() + (t + 1) * 4));
  }
  CHECK(h.ids_for(tokens, image, 4, 4).empty());
}

TEST_CASE("engram: ids are [layers, positions, cols] for two layers", "[unit][engram]") {
  HashConfig c = small_config();
  c.layer_ids = {1, 14};
  c.num_embeddings = {60, 120};  // 23, 29 | 31, 37
  const NgramHasher h(c, small_map());
  const std::vector<int32_t> tokens = {4, 0};
  const std::vector<int64_t> ids = h.ids_for(tokens, {}, 0, 2);
  REQUIRE(ids.size() == 2 * 2 * 4);
  const std::vector<int64_t>& m = h.multipliers();
  const int64_t rho2 = (0 * m[3]) ^ (3 * m[4]), rho3 = rho2 ^ (2 * m[5]);  // layer 14, t = 1
  CHECK(ids[(1 * 2 + 1) * 4 + 0] == rho2 % 23);
  CHECK(ids[(1 * 2 + 1) * 4 + 3] == rho3 % 37 + 83);
}

TEST_CASE("engram: hasher rejects bad config and inputs, naming them", "[unit][engram]") {
  HashConfig c = small_config();
  c.compressed_vocab_size = 5;
  CHECK_THROWS_WITH(
      NgramHasher(c, small_map()),
      Catch::Contains("engram_compressed_vocab_size is 5") && Catch::Contains("has 4 ids"));
  c = small_config();
  c.num_embeddings = {61};
  CHECK_THROWS_WITH(NgramHasher(c, small_map()), Catch::Contains("engram_num_embeddings[0] = 61"));
  c = small_config();
  c.pad_token_id = 5;
  CHECK_THROWS_WITH(NgramHasher(c, small_map()), Catch::Contains("engram_pad_token_id 5"));

  const NgramHasher h(small_config(), small_map());
  const std::vector<int32_t> bad = {1, 7, 1};
  CHECK_THROWS_WITH(h.ids_for(bad, {}, 0, 3), Catch::Contains("token id 7 at position 1"));
  const std::vector<int32_t> ok = {1, 2, 3};
  CHECK_THROWS_WITH(h.ids_for(ok, {}, 2, 4), Catch::Contains("positions [2, 4)"));
  const std::vector<uint8_t> short_image = {0, 0};
  CHECK_THROWS_WITH(h.ids_for(ok, short_image, 0, 3), Catch::Contains("2 image flags for 3"));
}
