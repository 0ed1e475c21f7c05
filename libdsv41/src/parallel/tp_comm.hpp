// TpComm: the collectives tensor parallelism needs between the ranks of one
// model (docs/tp.md). Implementations are separate targets behind this
// interface (style-models.md §3 principle 11): TpLocal (world 1), TpTcp (CPU
// sockets), TpNccl (GPU, dsv41_tp_nccl), and the one-shot RDMA all-reduce
// (oneshot_allreduce.hpp over ibv_shim.hpp). Every call is bounded by a timeout
// and watches an abort flag; a failed collective poisons the communicator (the
// byte stream between the ranks is then undefined), so every later call returns
// the same error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "dsv41/status.hpp"

namespace dsv41::parallel {

// The two ranks of the deployment (seed.md: head 10.10.10.13 = rank 0,
// worker 10.10.10.11 = rank 1). Wider worlds are out of scope: the model is
// split in half across two DGX Sparks.
inline constexpr int kMaxWorld = 2;

struct TpParams {
  int rank = 0;
  int world = 1;
  std::string peer_address;  // IPv4 literal of the other rank on the fabric,
                             // e.g. "10.10.10.11"
  std::string bind_address;  // IPv4 literal of this rank on the fabric; never a wildcard
  uint16_t port = 29500;     // rank 0 listens here on bind_address; rank 1 connects to it
  std::chrono::milliseconds connect_timeout{60000};   // rank 1 retries until rank 0 listens
  std::chrono::milliseconds op_timeout{30000};        // one collective, start to finish
  std::chrono::milliseconds heartbeat_interval{250};  // idle link: one heartbeat frame per interval
  std::chrono::milliseconds heartbeat_timeout{3000};  // no frame for this long -> peer stalled

  // kInvalidArgument naming the field: rank outside [0, world), world outside
  // [1, kMaxWorld], addresses that are not IPv4 literals or are wildcards
  // (0.0.0.0), equal addresses, port 0 for world 2, non-positive timeouts,
  // heartbeat_timeout <= 2 * heartbeat_interval.
  Status validate() const;
};

// Per-call bounds. timeout 0 means TpParams::op_timeout; abort (optional) is
// the caller's cancel flag, polled at least every 50 ms while the call waits.
struct CallControl {
  std::chrono::milliseconds timeout{0};
  const std::atomic<bool>* abort = nullptr;
};

class TpComm {
 public:
  virtual ~TpComm() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;

  // In-place sum over ranks. Every rank ends with bit-identical values: the sum
  // is formed in ascending rank order (x_0 + x_1) in fp32; bf16 inputs are
  // widened to fp32, summed in that order and rounded back to bf16 once (round
  // to nearest even).
  virtual Status all_reduce_sum_f32(std::span<float> data, const CallControl& ctl = {}) = 0;
  virtual Status all_reduce_sum_bf16(std::span<uint16_t> data, const CallControl& ctl = {}) = 0;
  // out = concat over ranks in rank order of every rank's `mine`; out.size() ==
  // world * mine.size().
  virtual Status all_gather(std::span<const std::byte> mine, std::span<std::byte> out,
                            const CallControl& ctl = {}) = 0;
  // data on every rank becomes root's data.
  virtual Status broadcast(std::span<std::byte> data, int root, const CallControl& ctl = {}) = 0;
  virtual Status barrier(const CallControl& ctl = {}) = 0;

  // Makes every pending and later call return kAborted with `reason`
  // (thread-safe; the engine calls it on shutdown or when another component
  // failed).
  virtual void abort(const std::string& reason) = 0;

  // Ok while the link is usable; otherwise the Status that poisoned it (peer lost, heartbeat
  // timeout, abort). Polls nothing: a watcher (the server's /health) may call it at any time
  // from any thread.
  virtual Status health() { return Status::ok(); }

  // True when the collectives' spans must be device memory (TpNccl: the CUDA forward's data
  // collectives hand it device buffers without host staging); false for the host transports.
  virtual bool takes_device_memory() const { return false; }
};

// A TpComm that forwards every call to `target` and owns nothing (target must outlive it): lets
// a wrapper that takes ownership of its bootstrap (make_tp_nccl) share the link that the runtime
// keeps using for its own messages. Calls on the two must not overlap (the runtime's forward
// thread makes both).
std::unique_ptr<TpComm> borrow_tp_comm(TpComm& target);

// "all_reduce_sum_f32" etc.: the op names used in errors and on the wire.
enum class TpOp : uint8_t { kAllReduceF32 = 1, kAllReduceBf16, kAllGather, kBroadcast, kBarrier };
const char* tp_op_name(TpOp op);

// World 1: every collective is the identity (all_gather copies, sums are
// unchanged).
std::unique_ptr<TpComm> make_tp_local();

}  // namespace dsv41::parallel
