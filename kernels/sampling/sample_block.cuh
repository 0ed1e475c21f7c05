// Block-wide pieces of the sampling kernels (sample_tokens.cu): exact fixed-point probability mass
// and its warp-aggregated bins; the float keys and the radix select by count are radix_topk.cuh's.
// Everything here is deterministic: integer sums do not depend on the order of the adds.
#pragma once

#include <cstdint>

#include "attention/radix_topk.cuh"

namespace dsv41::kernels::sampling {

using u128 = unsigned __int128;

constexpr unsigned kFullWarp = 0xffffffffu;

// Order-preserving float keys (-0 and +0 share one: the CPU compares them equal, so top_k keeps a
// -0 tied with a +0 k-th value) and the radix select by count: attention/radix_topk.cuh.
using radix::order_key;

// floor(w · 2^63) for 0 <= w <= 1, from the bits (exact; w = 1 gives 2^63). A row's sum of
// 129,280 such values stays below 2^80 in a u128, and the truncation costs < 2^-63 per token,
// i.e. < 1.5e-14 of a total that is >= 1 (the most likely token has weight exp(0) = 1).
__device__ __forceinline__ uint64_t to_fixed(double w) {
  const uint64_t b = static_cast<uint64_t>(__double_as_longlong(w));
  const int e = static_cast<int>(b >> 52);
  if (e == 0) return 0;  // +0 or subnormal: below 2^-1022
  const uint64_t m = (b & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int shift = e - 1075 + 63;  // w = m · 2^(e - 1075)
  if (shift >= 0) return m << shift;
  if (shift <= -64) return 0;
  return m >> -shift;
}

__device__ __forceinline__ double to_double(u128 x) {
  return static_cast<double>(static_cast<uint64_t>(x >> 64)) * 18446744073709551616.0 +
         static_cast<double>(static_cast<uint64_t>(x));
}

// apply_top_p's stop test "(total - prefix) / total <= 1 - top_p" on fixed-point masses.
__device__ __forceinline__ bool tail_dropped(u128 total, u128 prefix, double drop_mass) {
  return to_double(total - prefix) / to_double(total) <= drop_mass;
}

// Fixed-point mass bins: 3 limbs of 21 bits per bin (a warp's sum of 32 limbs fits 32 bits for
// the hardware reduction), each limb summed in 64 bits.
constexpr int kLimbBits = 21;
constexpr uint64_t kLimbMask = (uint64_t{1} << kLimbBits) - 1;

__device__ __forceinline__ u128 bin_mass(const unsigned long long* bins, int d) {
  return static_cast<u128>(bins[3 * d]) + (static_cast<u128>(bins[3 * d + 1]) << kLimbBits) +
         (static_cast<u128>(bins[3 * d + 2]) << (2 * kLimbBits));
}

// Adds q to bins[d] for the lanes with valid set. All 32 lanes of the warp must call it.
// Lanes with the same digit are summed first (peaked distributions put most tokens into a few
// digits; one shared atomic per lane would serialise on them).
__device__ __forceinline__ void add_mass(unsigned long long* bins, int d, uint64_t q, bool valid) {
  const unsigned active = __ballot_sync(kFullWarp, valid);
  if (!valid) return;
  const unsigned peers = __match_any_sync(active, d);
  const unsigned s0 = __reduce_add_sync(peers, static_cast<unsigned>(q & kLimbMask));
  const unsigned s1 = __reduce_add_sync(peers, static_cast<unsigned>((q >> kLimbBits) & kLimbMask));
  const unsigned s2 = __reduce_add_sync(peers, static_cast<unsigned>(q >> (2 * kLimbBits)));
  if ((threadIdx.x & 31) == __ffs(peers) - 1) {
    atomicAdd(&bins[3 * d], static_cast<unsigned long long>(s0));
    atomicAdd(&bins[3 * d + 1], static_cast<unsigned long long>(s1));
    atomicAdd(&bins[3 * d + 2], static_cast<unsigned long long>(s2));
  }
}

}  // namespace dsv41::kernels::sampling
