// ValueTable: the element generator of one Fill (synthetic_checkpoint.hpp). Random fills map 16
// random bits to one element through a 65,536-entry table of inverse-normal quantiles
// (u + 0.5) / 65536, encoded in the tensor's dtype; the code std is calibrated so that the
// decoded table RMS equals the requested sigma (rounding to e4m3 / e2m1 / bf16 changes it).
// kBits writes the stream's words directly (~8 B per splitmix64 step, the EXL3 trellis bulk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "synthetic/synthetic_checkpoint.hpp"

namespace dsv41::synth {

class ValueTable {
 public:
  // Throws kInvalidArgument for a (dtype, fill) pair the writer never produces.
  static ValueTable make(const SyntheticTensor& t);

  size_t elem_bytes() const { return elem_; }
  // RMS of the decoded values one element takes (over the table; the constant for kConst).
  double rms() const { return rms_; }
  // dst[0, n) (n a multiple of elem_bytes()) from the splitmix64 stream that starts at `stream`.
  void fill(uint8_t* dst, size_t n, uint64_t stream) const;

 private:
  size_t elem_ = 1;
  bool constant_ = false;
  bool bits_ = false;  // kBits: the splitmix64 words themselves, no table
  double rms_ = 0.0;
  std::vector<uint8_t> table_;  // elem_ bytes (kConst) or 65536 x elem_ bytes
};

// splitmix64 step: advances *state, returns 64 well-mixed bits.
inline uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace dsv41::synth
