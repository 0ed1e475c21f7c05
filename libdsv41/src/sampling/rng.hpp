// The sampler's random numbers: xoshiro256** seeded through SplitMix64, both written from the
// published algorithms (Blackman & Vigna, "Scrambled linear pseudorandom number generators",
// and prng.di.unimi.it: splitmix64.c, xoshiro256starstar.c). Only 64-bit integer arithmetic, so
// a seed gives the same stream on every platform and compiler. Spec: docs/sampling.md §RNG.
#pragma once

#include <array>
#include <cstdint>

namespace dsv41::sampling {

// One SplitMix64 step: state += 0x9E3779B97F4A7C15, then the output mix of that state.
uint64_t splitmix64_next(uint64_t& state);

class Xoshiro256StarStar {
 public:
  // State words s[0..3] = four successive splitmix64_next outputs from state = seed (the
  // seeding the xoshiro authors recommend). The result is never the all-zero state.
  explicit Xoshiro256StarStar(uint64_t seed);
  // Raw state, for reference vectors. Throws kInvalidArgument for the all-zero state (a fixed
  // point that would output 0 forever).
  static Xoshiro256StarStar from_state(const std::array<uint64_t, 4>& state);

  uint64_t next();
  // (next() >> 11) * 2^-53: a multiple of 2^-53 in [0, 1).
  double uniform();

 private:
  Xoshiro256StarStar() = default;
  std::array<uint64_t, 4> s_{};
};

}  // namespace dsv41::sampling
