// OneShotPlan: the registered-memory layout of the one-shot RDMA all-reduce
// (world 2). Each rank registers one region; the peer RDMA-writes into its
// receive slots (docs/tp.md "One-shot").
//
//   offset 0:                 recv slot 0  [header 64 B | data capacity | flag
//   64 B] recv_stride:              recv slot 1  (same) 2 * recv_stride: send
//   slot 0  [header 64 B | data capacity | flag 64 B] 3 * recv_stride: send
//   slot 1 total_bytes = 4 * recv_stride, every slot 4096-aligned (page-aligned
//   for ibv_reg_mr).
//
// Two slots per direction because op e+2 may reuse slot e%2 only when the peer
// has finished reading it: the peer's flag for op e+1 proves that (it posts e+1
// only after reducing e), and our own data write of op e has then been
// delivered, so its send slot is free as well.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dsv41/status.hpp"

namespace dsv41::parallel {

inline constexpr size_t kOneShotAlign = 4096;
inline constexpr size_t kOneShotHeaderBytes = 64;  // {u64 epoch, u64 bytes, u32 op}: see header
inline constexpr size_t kOneShotFlagBytes = 64;    // own cache line: the u64 epoch flag
// One-shot pays off for decode-sized messages (48 KB: 59 -> 23 us,
// performance-anchors.md §2.2); prefill-sized ones go to NCCL. 16 MiB caps the
// pinned region at 64 MiB per rank.
inline constexpr size_t kOneShotMaxBytes = size_t{16} << 20;

struct OneShotPlan {
  size_t max_bytes = 0;    // largest message (bytes of one rank's buffer)
  size_t recv_stride = 0;  // bytes of one slot, 4096-aligned
  size_t total_bytes = 0;  // the registered region

  size_t recv_slot(int slot) const { return static_cast<size_t>(slot) * recv_stride; }
  size_t send_slot(int slot) const { return (2 + static_cast<size_t>(slot)) * recv_stride; }
  // Within a slot: header at +0, data at +kOneShotHeaderBytes, flag at
  // flag_offset().
  size_t flag_offset() const { return recv_stride - kOneShotFlagBytes; }
};

// kInvalidArgument for 0 or > kOneShotMaxBytes, naming the value.
Result<OneShotPlan> plan_oneshot(size_t max_bytes);

}  // namespace dsv41::parallel
