// OneShotAllReduce state machine (oneshot_allreduce.hpp).
#include "parallel/oneshot_allreduce.hpp"

#include <atomic>
#include <cstring>
#include <thread>

#include "core/check.hpp"
#include "parallel/rank_sum.hpp"

namespace dsv41::parallel {
namespace {

constexpr uint32_t kOpF32 = 1;
constexpr uint32_t kOpBf16 = 2;

// Written with the data (header + payload in one write), so it is visible
// before the flag.
struct SlotHeader {
  uint64_t epoch;
  uint64_t bytes;
  uint32_t op;
};
static_assert(sizeof(SlotHeader) <= kOneShotHeaderBytes);

const char* op_name(uint32_t op) { return op == kOpF32 ? "f32" : op == kOpBf16 ? "bf16" : "?"; }

uint64_t load_flag(std::byte* p) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p)).load(std::memory_order_acquire);
}

}  // namespace

const char* oneshot_state_name(OneShotState s) {
  switch (s) {
    case OneShotState::kIdle:
      return "idle";
    case OneShotState::kPosted:
      return "posted";
    case OneShotState::kWaitingPeer:
      return "waiting_peer";
    case OneShotState::kReducing:
      return "reducing";
    case OneShotState::kFailed:
      return "failed";
  }
  return "?";
}

OneShotAllReduce::OneShotAllReduce(const OneShotPlan& plan, OneShotTransport& transport, int rank)
    : plan_(plan), transport_(transport), rank_(rank) {}

Status OneShotAllReduce::all_reduce_sum_f32(std::span<float> data,
                                            std::chrono::milliseconds timeout,
                                            const std::atomic<bool>* abort) {
  return run(kOpF32, std::as_writable_bytes(data), timeout, abort);
}

Status OneShotAllReduce::all_reduce_sum_bf16(std::span<uint16_t> data,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* abort) {
  return run(kOpBf16, std::as_writable_bytes(data), timeout, abort);
}

Status OneShotAllReduce::run(uint32_t op, std::span<std::byte> data,
                             std::chrono::milliseconds timeout, const std::atomic<bool>* abort) {
  if (state_ == OneShotState::kFailed) return failure_;
  if (data.size() > plan_.max_bytes)
    return {ErrorCode::kInvalidArgument,
            fmt::format("one-shot all-reduce of {} bytes exceeds the planned {} bytes", data.size(),
                        plan_.max_bytes)};
  const uint64_t e = epoch_ + 1;
  const int slot = static_cast<int>(e % 2);
  Status s = detail::capture_status([&] {
    std::span<std::byte> region = transport_.local_region();
    DSV41_CHECK(region.size() >= plan_.total_bytes, kInternal,
                "one-shot region has {} bytes, plan needs {}", region.size(), plan_.total_bytes);
    // kIdle -> kPosted: header + data, then the flag, into the peer's receive
    // slot.
    std::byte* send = region.data() + plan_.send_slot(slot);
    SlotHeader h{e, data.size(), op};
    std::memcpy(send, &h, sizeof(h));
    if (!data.empty()) std::memcpy(send + kOneShotHeaderBytes, data.data(), data.size());
    transport_.post_write(plan_.send_slot(slot), plan_.recv_slot(slot),
                          kOneShotHeaderBytes + data.size());
    transport_.post_flag(plan_.recv_slot(slot) + plan_.flag_offset(), e);
    state_ = OneShotState::kPosted;
    // kPosted -> kWaitingPeer: the peer's flag for epoch e in my receive slot.
    state_ = OneShotState::kWaitingPeer;
    std::byte* recv = region.data() + plan_.recv_slot(slot);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (uint32_t spins = 0;; ++spins) {
      uint64_t flag = load_flag(recv + plan_.flag_offset());
      if (flag == e) break;
      DSV41_CHECK(flag < e, kInternal, "one-shot protocol: peer flag {} ahead of epoch {}", flag,
                  e);
      Status t = transport_.poll();
      if (!t.is_ok()) throw detail::Failure(t.code(), t.message(), __FILE__, __LINE__);
      DSV41_CHECK(abort == nullptr || !abort->load(), kAborted,
                  "one-shot all-reduce #{} aborted by the caller", e);
      DSV41_CHECK(std::chrono::steady_clock::now() < deadline, kTimeout,
                  "one-shot all-reduce #{} ({} bytes): no flag from peer rank "
                  "{} within {} ms",
                  e, data.size(), 1 - rank_, timeout.count());
      if (spins > 1024) std::this_thread::yield();  // spin first: the wire floor is ~9 us
    }
    // kWaitingPeer -> kReducing: the peer's header must describe the same op.
    state_ = OneShotState::kReducing;
    SlotHeader peer;
    std::memcpy(&peer, recv, sizeof(peer));
    DSV41_CHECK(peer.epoch == e && peer.bytes == data.size() && peer.op == op, kInvalidArgument,
                "one-shot all-reduce #{} mismatch: rank {} sent {} {} bytes "
                "(epoch {}), rank {} "
                "sent {} {} bytes",
                e, 1 - rank_, op_name(peer.op), peer.bytes, peer.epoch, rank_, op_name(op),
                data.size());
    reduce(op, data, recv + kOneShotHeaderBytes);
  });
  if (!s.is_ok()) {
    state_ = OneShotState::kFailed;
    failure_ = s;
    return s;
  }
  epoch_ = e;
  state_ = OneShotState::kIdle;
  return s;
}

void OneShotAllReduce::reduce(uint32_t op, std::span<std::byte> data, const std::byte* peer) const {
  if (op == kOpF32) {
    sum_rank_order_f32({reinterpret_cast<float*>(data.data()), data.size() / 4}, peer, rank_);
  } else {
    sum_rank_order_bf16({reinterpret_cast<uint16_t*>(data.data()), data.size() / 2}, peer, rank_);
  }
}

}  // namespace dsv41::parallel
