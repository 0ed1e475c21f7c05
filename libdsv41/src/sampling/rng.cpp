// SplitMix64 and xoshiro256** (see rng.hpp for the sources of the algorithms).
#include "sampling/rng.hpp"

#include "core/check.hpp"

namespace dsv41::sampling {

namespace {

constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Xoshiro256StarStar::Xoshiro256StarStar(uint64_t seed) {
  uint64_t sm = seed;
  for (uint64_t& word : s_) word = splitmix64_next(sm);
  // SplitMix64's output mix is a bijection of distinct counter values, so at most one of the
  // four words can be zero and the state is never all-zero.
}

Xoshiro256StarStar Xoshiro256StarStar::from_state(const std::array<uint64_t, 4>& state) {
  DSV41_CHECK(state[0] | state[1] | state[2] | state[3], kInvalidArgument,
              "xoshiro256** state must not be all zero");
  Xoshiro256StarStar rng;
  rng.s_ = state;
  return rng;
}

uint64_t Xoshiro256StarStar::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Xoshiro256StarStar::uniform() {
  // The top 53 bits: every double in the grid k * 2^-53, k < 2^53, is equally likely.
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

}  // namespace dsv41::sampling
