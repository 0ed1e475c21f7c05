// Bit-exact re-implementation of numpy's `np.random.default_rng(seed)` (SeedSequence -> PCG64
// XSL-RR) and `Generator.integers(low, high, size=n, dtype=np.int64)`, so that the Engram hash
// multipliers (spec model-architecture.md §5.2 step 3) are reproduced without numpy.
// Written from the algorithm descriptions in numpy/random/{bit_generator.pyx, _pcg64.pyx,
// src/pcg64/pcg64.h, _bounded_integers.pyx.in, src/distributions/distributions.c}; see
// docs/formats/engram.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dsv41::engram {

// A non-negative integer seed as numpy splits it: 32-bit words, least significant first;
// 0 becomes the single word [0].
std::vector<uint32_t> seed_words(uint64_t seed);

// SeedSequence(entropy).generate_state(n_words, np.uint32) with the default pool of 4 words and
// no spawn key. `entropy` holds the seed words as produced by seed_words().
std::vector<uint32_t> seed_sequence_generate_state(std::span<const uint32_t> entropy,
                                                   size_t n_words);

// numpy's PCG64 (128-bit LCG, multiplier 0x2360ED051FC65DA44385DF649FCCF645, output XSL-RR),
// seeded from SeedSequence(seed).generate_state(4, np.uint64) = [state_hi, state_lo, inc_hi,
// inc_lo] the way numpy's pcg64_set_seed does.
class NumpyPcg64 {
 public:
  explicit NumpyPcg64(uint64_t seed);

  uint64_t next_u64();
  // numpy's next_uint32: the low half of a fresh 64-bit draw, then its buffered high half.
  uint32_t next_u32();

  // Generator.integers(low, high, size=n, dtype=np.int64, endpoint=False): numpy draws on the
  // closed range [low, high-1] with Lemire's multiply-shift rejection (64-bit when
  // high-1-low > 0xFFFFFFFF, else the 32-bit variant on next_u32()). Throws kInvalidArgument
  // when low >= high.
  std::vector<int64_t> integers(int64_t low, int64_t high, size_t n);

  uint64_t state_hi() const { return static_cast<uint64_t>(state_ >> 64); }
  uint64_t state_lo() const { return static_cast<uint64_t>(state_); }
  uint64_t inc_hi() const { return static_cast<uint64_t>(inc_ >> 64); }
  uint64_t inc_lo() const { return static_cast<uint64_t>(inc_); }

 private:
  void step();
  uint64_t bounded_u64(uint64_t rng);  // uniform on [0, rng], rng < 2^64 - 1
  uint32_t bounded_u32(uint32_t rng);  // uniform on [0, rng], rng < 2^32 - 1

  unsigned __int128 state_ = 0;
  unsigned __int128 inc_ = 0;
  bool has_u32_ = false;
  uint32_t buffered_u32_ = 0;
};

}  // namespace dsv41::engram
