// OneShotAllReduce: the protocol of the one-shot all-reduce (world 2) over an
// abstract RDMA transport: copy my buffer into my send slot, RDMA-write it into
// the peer's receive slot, then post the flag (epoch) after it; wait for the
// peer's flag in my receive slot; reduce in rank order. One round trip, no
// rendezvous per op (B12X "RoCEnante", performance-anchors.md §2.2). The
// transport is an interface so the protocol is tested in process
// (tests/unit/parallel); the ibverbs transport is UNVERIFIED ON HARDWARE
// (docs/tp.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>

#include "dsv41/status.hpp"
#include "parallel/oneshot_plan.hpp"

namespace dsv41::parallel {

class OneShotTransport {
 public:
  virtual ~OneShotTransport() = default;
  // This rank's registered region, plan.total_bytes long, 4096-aligned.
  virtual std::span<std::byte> local_region() = 0;
  // Posts a write of local_region()[local_offset, +bytes) to the peer's region
  // at remote_offset. Writes land in post order (RC queue pair ordering), which
  // is what makes "flag after data" sufficient. An 8-byte write of an aligned
  // flag lands atomically.
  virtual void post_write(size_t local_offset, size_t remote_offset, size_t bytes) = 0;
  // Makes the peer's region hold `value` (u64, 8-aligned) at remote_offset, visible to the
  // peer's acquire load only after every earlier post_write has landed. Values of successive
  // calls are 1, 2, 3, ... (the op epoch): the ibverbs transport relies on that and sends only a
  // zero-length RDMA WRITE WITH IMMEDIATE (imm = remote_offset / 64), the receiver storing its
  // own count when the completion arrives, which the verbs spec orders after the data.
  virtual void post_flag(size_t remote_offset, uint64_t value) = 0;
  // Reaps completions; non-ok on a transport error (completion with error
  // status, QP in error).
  virtual Status poll() = 0;
};

enum class OneShotState { kIdle, kPosted, kWaitingPeer, kReducing, kFailed };
const char* oneshot_state_name(OneShotState s);

class OneShotAllReduce {
 public:
  OneShotAllReduce(const OneShotPlan& plan, OneShotTransport& transport, int rank);

  // Same contract as TpComm::all_reduce_sum_*: ascending rank order,
  // bit-identical results. kInvalidArgument (too large: nothing is posted, the
  // state stays kIdle), kTimeout, kAborted, kInvalidArgument when the peer's
  // op/size differ (both ranks see it). Any failure after a post leaves
  // kFailed: the slots are then undefined and every later call fails.
  Status all_reduce_sum_f32(std::span<float> data, std::chrono::milliseconds timeout,
                            const std::atomic<bool>* abort = nullptr);
  Status all_reduce_sum_bf16(std::span<uint16_t> data, std::chrono::milliseconds timeout,
                             const std::atomic<bool>* abort = nullptr);

  OneShotState state() const { return state_; }
  uint64_t completed_ops() const { return epoch_; }

 private:
  Status run(uint32_t op, std::span<std::byte> data, std::chrono::milliseconds timeout,
             const std::atomic<bool>* abort);
  void reduce(uint32_t op, std::span<std::byte> data, const std::byte* peer) const;

  OneShotPlan plan_;
  OneShotTransport& transport_;
  int rank_;
  uint64_t epoch_ = 0;  // completed ops; op e (1-based) uses slot e % 2 and flag value e
  OneShotState state_ = OneShotState::kIdle;
  Status failure_;
};

}  // namespace dsv41::parallel
