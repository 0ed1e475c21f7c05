// Engram bucket primes and offsets (spec model-architecture.md §5.2 step 2).
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "core/check.hpp"
#include "engram/primes.hpp"

using namespace dsv41::engram;

TEST_CASE("engram: is_prime", "[unit][engram]") {
  CHECK_FALSE(is_prime(0));
  CHECK_FALSE(is_prime(1));
  CHECK(is_prime(2));
  CHECK(is_prime(3));
  CHECK_FALSE(is_prime(4));
  CHECK(is_prime(16000057));
  CHECK_FALSE(is_prime(16000059));
  CHECK_FALSE(is_prime(3215031751ull));      // strong pseudoprime to bases 2, 3, 5, 7
  CHECK(is_prime(18446744073709551557ull));  // largest 64-bit prime
  CHECK_FALSE(is_prime(18446744073709551559ull));
}

TEST_CASE("engram: released primes, offsets and table rows", "[unit][engram]") {
  const PrimeLayout p = find_primes(2, 4, 8, 16000000);
  REQUIRE(p.primes.size() == 48);
  const std::vector<int64_t> layer1_n2 = {16000057, 16000079, 16000081, 16000097,
                                          16000121, 16000129, 16000133, 16000183};
  CHECK(std::vector<int64_t>(p.primes.begin(), p.primes.begin() + 8) == layer1_n2);
  CHECK(p.prime(0, 23) == 16000463);
  CHECK(p.prime(1, 0) == 16000477);
  CHECK(p.prime(1, 23) == 16000889);
  CHECK(p.table_rows == std::vector<int64_t>{384006168, 384016682});
  CHECK(p.offset(0, 0) == 0);
  CHECK(p.offset(0, 1) == 16000057);
  CHECK(p.offset(1, 0) == 0);  // each layer's table is addressed from its own start
  CHECK(p.offset(1, 23) == 384016682 - 16000889);
  const std::vector<int64_t> released = {384006168, 384016682};
  CHECK(check_num_embeddings(p, released).is_ok());
}

TEST_CASE("engram: num_embeddings mismatch names the key", "[unit][engram]") {
  const PrimeLayout p = find_primes(2, 4, 8, 16000000);
  const std::vector<int64_t> wrong = {384006168, 384016681};
  const dsv41::Status s = check_num_embeddings(p, wrong);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.code() == dsv41::ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("engram_num_embeddings[1] = 384016681") &&
                              Catch::Contains("384016682"));
  const std::vector<int64_t> short_list = {384006168};
  CHECK_THAT(check_num_embeddings(p, short_list).message(),
             Catch::Contains("engram_num_embeddings has 1 entries"));
}

TEST_CASE("engram: prime search on a small hand-checked case", "[unit][engram]") {
  // Primes above 9: 11 13 17 19 23 29 (n=2: 11, 13; n=3: 17, 19 | layer 2: 23, 29; 31, 37).
  const PrimeLayout p = find_primes(2, 3, 2, 10);
  CHECK(p.primes == std::vector<int64_t>{11, 13, 17, 19, 23, 29, 31, 37});
  CHECK(p.offsets == std::vector<int64_t>{0, 11, 24, 41, 0, 23, 52, 83});
  CHECK(p.table_rows == std::vector<int64_t>{60, 120});
}

TEST_CASE("engram: prime search rejects bad config", "[unit][engram]") {
  CHECK_THROWS_WITH(find_primes(1, 1, 8, 100), Catch::Contains("engram_max_ngram_size"));
  CHECK_THROWS_WITH(find_primes(1, 4, 0, 100), Catch::Contains("engram_n_heads"));
  CHECK_THROWS_WITH(find_primes(1, 4, 8, 0), Catch::Contains("engram_vocab_size"));
  CHECK_THROWS_WITH(find_primes(-1, 4, 8, 100), Catch::Contains("-1 layers"));
  // 2^63 - 1 is composite and nothing above it fits int64.
  CHECK_THROWS_WITH(find_primes(1, 2, 1, INT64_MAX), Catch::Contains("overflowed int64"));
}
