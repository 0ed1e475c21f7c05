#include "engram/numpy_pcg64.hpp"

#include <limits>

#include "core/check.hpp"

namespace dsv41::engram {
namespace {

// SeedSequence hash constants (numpy bit_generator.pyx, after M. O'Neill's seed_seq_fe).
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr uint32_t kXShift = 16;  // half the word width
constexpr size_t kPoolSize = 4;   // DEFAULT_POOL_SIZE: a 128-bit entropy pool

// PCG's default 128-bit LCG multiplier.
constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ull) << 64) | 4865540595714422341ull;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;  // the multiplier advances on every call
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

uint64_t rotr64(uint64_t v, unsigned rot) { return (v >> rot) | (v << ((-rot) & 63u)); }

}  // namespace

std::vector<uint32_t> seed_words(uint64_t seed) {
  if (seed == 0) return {0u};
  std::vector<uint32_t> words;
  for (; seed != 0; seed >>= 32) words.push_back(static_cast<uint32_t>(seed));
  return words;
}

std::vector<uint32_t> seed_sequence_generate_state(std::span<const uint32_t> entropy,
                                                   size_t n_words) {
  DSV41_CHECK(!entropy.empty(), kInvalidArgument, "SeedSequence: empty entropy");
  // mix_entropy: hash the first kPoolSize words (or zeros) into the pool, cross-mix every pool
  // word into every other, then fold any remaining entropy words into each pool word.
  uint32_t pool[kPoolSize];
  uint32_t hash_const = kInitA;
  for (size_t i = 0; i < kPoolSize; ++i)
    pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, hash_const);
  for (size_t src = 0; src < kPoolSize; ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
  for (size_t src = kPoolSize; src < entropy.size(); ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));

  // generate_state: cycle over the pool with a second running multiplier.
  std::vector<uint32_t> out(n_words);
  uint32_t hash_b = kInitB;
  for (size_t i = 0; i < n_words; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hash_b;
    hash_b *= kMultB;
    v *= hash_b;
    v ^= v >> kXShift;
    out[i] = v;
  }
  return out;
}

NumpyPcg64::NumpyPcg64(uint64_t seed) {
  const std::vector<uint32_t> words = seed_words(seed);
  // generate_state(4, np.uint64) = 8 uint32 words viewed little-endian as 4 uint64.
  const std::vector<uint32_t> s = seed_sequence_generate_state(words, 8);
  uint64_t u[4];
  for (int i = 0; i < 4; ++i) u[i] = uint64_t{s[2 * i]} | (uint64_t{s[2 * i + 1]} << 32);
  const unsigned __int128 init_state = (static_cast<unsigned __int128>(u[0]) << 64) | u[1];
  const unsigned __int128 init_seq = (static_cast<unsigned __int128>(u[2]) << 64) | u[3];
  // pcg_setseq_128_srandom_r: odd increment from the sequence, one step, add the state, step.
  state_ = 0;
  inc_ = (init_seq << 1) | 1u;
  step();
  state_ += init_state;
  step();
}

void NumpyPcg64::step() { state_ = state_ * kPcgMultiplier + inc_; }

uint64_t NumpyPcg64::next_u64() {
  step();  // numpy advances first, then outputs from the new state
  const uint64_t hi = static_cast<uint64_t>(state_ >> 64);
  const uint64_t lo = static_cast<uint64_t>(state_);
  return rotr64(hi ^ lo, static_cast<unsigned>(hi >> 58));
}

uint32_t NumpyPcg64::next_u32() {
  if (has_u32_) {
    has_u32_ = false;
    return buffered_u32_;
  }
  const uint64_t next = next_u64();
  has_u32_ = true;
  buffered_u32_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next);
}

uint64_t NumpyPcg64::bounded_u64(uint64_t rng) {
  // Lemire: m = x * (rng+1) in 128 bits, result = m >> 64; reject while the low half is below
  // (2^64 - (rng+1)) mod (rng+1), computed only when the low half is below rng+1.
  const uint64_t rng_excl = rng + 1;
  unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * rng_excl;
  uint64_t leftover = static_cast<uint64_t>(m);
  if (leftover < rng_excl) {
    const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<unsigned __int128>(next_u64()) * rng_excl;
      leftover = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

uint32_t NumpyPcg64::bounded_u32(uint32_t rng) {
  const uint32_t rng_excl = rng + 1;
  uint64_t m = uint64_t{next_u32()} * rng_excl;
  uint32_t leftover = static_cast<uint32_t>(m);
  if (leftover < rng_excl) {
    const uint32_t threshold = (std::numeric_limits<uint32_t>::max() - rng) % rng_excl;
    while (leftover < threshold) {
      m = uint64_t{next_u32()} * rng_excl;
      leftover = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

std::vector<int64_t> NumpyPcg64::integers(int64_t low, int64_t high, size_t n) {
  DSV41_CHECK(low < high, kInvalidArgument, "integers: low {} >= high {}", low, high);
  // numpy subtracts 1 from `high` and samples the closed range: off = low, rng = high-1-low.
  const uint64_t off = static_cast<uint64_t>(low);
  const uint64_t rng = static_cast<uint64_t>(high - 1) - static_cast<uint64_t>(low);
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t v;
    if (rng == 0) {
      v = 0;  // no draw is consumed
    } else if (rng < 0xFFFFFFFFull) {
      v = bounded_u32(static_cast<uint32_t>(rng));
    } else if (rng == 0xFFFFFFFFull) {
      v = next_u32();
    } else if (rng == std::numeric_limits<uint64_t>::max()) {
      v = next_u64();
    } else {
      v = bounded_u64(rng);
    }
    out[i] = static_cast<int64_t>(off + v);
  }
  return out;
}

}  // namespace dsv41::engram
