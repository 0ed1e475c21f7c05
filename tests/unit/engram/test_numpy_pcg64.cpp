// numpy default_rng / Generator.integers reproduction (spec model-architecture.md §5.2 step 3).
// Reference values: numpy's own test data (numpy/random/tests/test_seed_sequence.py,
// data/pcg64-testset-{1,2}.csv) and the released multipliers of spec §5.2.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/check.hpp"
#include "engram/multipliers.hpp"
#include "engram/numpy_pcg64.hpp"

using namespace dsv41::engram;

TEST_CASE("engram: SeedSequence matches numpy's reference data", "[unit][engram]") {
  const std::vector<uint32_t> in1 = {3735928559u, 195939070u, 229505742u, 305419896u};
  CHECK(seed_sequence_generate_state(in1, 4) ==
        std::vector<uint32_t>{3914649087u, 576849849u, 3593928901u, 2229911004u});
  const std::vector<uint32_t> in2 = {2766103236u, 2883057919u, 4029656435u, 862374500u};
  CHECK(seed_sequence_generate_state(in2, 4) ==
        std::vector<uint32_t>{296367413u, 4262059219u, 13109864u, 3283683422u});
  // generate_state(2, uint64) = 4 uint32 words paired little-endian.
  const std::vector<uint32_t> w = seed_sequence_generate_state(in1, 4);
  CHECK((uint64_t{w[0]} | uint64_t{w[1]} << 32) == 2477551240072187391ull);
  CHECK((uint64_t{w[2]} | uint64_t{w[3]} << 32) == 9577394838764454085ull);
}

TEST_CASE("engram: seed words split least significant first", "[unit][engram]") {
  CHECK(seed_words(0) == std::vector<uint32_t>{0u});
  CHECK(seed_words(10007) == std::vector<uint32_t>{10007u});
  CHECK(seed_words(0x100000002ull) == std::vector<uint32_t>{2u, 1u});
}

TEST_CASE("engram: PCG64 stream matches numpy's test sets", "[unit][engram]") {
  NumpyPcg64 a(0xdeadbeafull);
  CHECK(a.next_u64() == 0x60d24054e17a0698ull);
  CHECK(a.next_u64() == 0xd5e79d89856e4f12ull);
  CHECK(a.next_u64() == 0xd254972fe64bd782ull);
  CHECK(a.next_u64() == 0xf1e3072a53c72571ull);
  NumpyPcg64 b(0);
  CHECK(b.next_u64() == 0xa30febcfd9c2825full);
  CHECK(b.next_u64() == 0x4510bdf882d9d721ull);
}

TEST_CASE("engram: next_u32 returns the low then the buffered high half", "[unit][engram]") {
  NumpyPcg64 a(123), b(123);
  const uint64_t x = a.next_u64();
  CHECK(b.next_u32() == static_cast<uint32_t>(x));
  CHECK(b.next_u32() == static_cast<uint32_t>(x >> 32));
  CHECK(a.state_lo() == b.state_lo());
}

TEST_CASE("engram: integers: 32-bit Lemire path on next_u32, range and offset", "[unit][engram]") {
  // rng = 999 < 2^32 - 1: each value is (u32 * 1000) >> 32 unless rejected; rejection needs
  // the low word < (2^32 - 1000) % 1000 = 296, which these draws do not hit (checked below).
  NumpyPcg64 ref(7);
  std::vector<int64_t> want;
  for (int i = 0; i < 6; ++i) {
    const uint64_t m = uint64_t{ref.next_u32()} * 1000u;
    REQUIRE(static_cast<uint32_t>(m) >= 296u);
    want.push_back(static_cast<int64_t>(m >> 32) + 5);
  }
  NumpyPcg64 rng(7);
  CHECK(rng.integers(5, 1005, 6) == want);
}

TEST_CASE("engram: integers: degenerate range consumes no draw, bad range is an error",
          "[unit][engram]") {
  NumpyPcg64 a(1), b(1);
  CHECK(a.integers(3, 4, 3) == std::vector<int64_t>{3, 3, 3});
  CHECK(a.next_u64() == b.next_u64());
  CHECK_THROWS_AS(a.integers(4, 4, 1), dsv41::detail::Failure);
  CHECK_THROWS_WITH(a.integers(9, 2, 1), Catch::Contains("low 9 >= high 2"));
}

TEST_CASE("engram: released multipliers (spec §5.2)", "[unit][engram]") {
  CHECK(multiplier_bound(99092) == 46539438283891);
  const std::vector<int64_t> layers = {1, 14};
  const std::vector<int64_t> got = hash_multipliers(layers, 4, 99092);
  const std::vector<int64_t> want = {76632096046245, 4839876093313,  35959672319349,
                                     73987337458391, 67716810739261, 51510806800915,
                                     30921347202721, 82619226485591};
  CHECK(got == want);
}

TEST_CASE("engram: multiplier bound and bad inputs", "[unit][engram]") {
  CHECK(multiplier_bound(1) == INT64_MAX / 2);
  CHECK(multiplier_bound(491) == 9392435882744170);  // the tiny goldens' compressed vocab
  CHECK(multiplier_bound(INT64_MAX) == 1);           // max(1, 0)
  CHECK_THROWS_WITH(multiplier_bound(0), Catch::Contains("engram_compressed_vocab_size"));
  const std::vector<int64_t> neg = {-1};
  CHECK_THROWS_WITH(hash_multipliers(neg, 4, 10), Catch::Contains("engram_layer_ids"));
  const std::vector<int64_t> one = {1};
  CHECK_THROWS_WITH(hash_multipliers(one, 0, 10), Catch::Contains("engram_max_ngram_size"));
  CHECK_THROWS_WITH(seed_sequence_generate_state({}, 4), Catch::Contains("empty entropy"));
}
