// TpIbverbs (tp_ibverbs.hpp).
#include "parallel/tp_ibverbs.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <mutex>

namespace dsv41::parallel {
namespace {

// Adds the comm's own abort and the TCP link's health to the transport's poll, so a lost peer
// (heartbeat) or abort() ends a one-shot wait at once instead of at the op timeout.
class GuardedTransport final : public OneShotTransport {
 public:
  GuardedTransport(IbvTransport& t, TpComm& tcp, const std::atomic<bool>& aborted)
      : t_(t), tcp_(tcp), aborted_(aborted) {}
  std::span<std::byte> local_region() override { return t_.local_region(); }
  void post_write(size_t l, size_t r, size_t b) override { t_.post_write(l, r, b); }
  void post_flag(size_t r, uint64_t v) override { t_.post_flag(r, v); }
  Status poll() override {
    if (aborted_.load()) return {ErrorCode::kAborted, "TP aborted locally"};
    if (Status h = tcp_.health(); !h.is_ok()) return h;
    return t_.poll();
  }

 private:
  IbvTransport& t_;
  TpComm& tcp_;
  const std::atomic<bool>& aborted_;
};

class TpIbverbsComm final : public TpComm {
 public:
  TpIbverbsComm(std::unique_ptr<TpComm> tcp, std::unique_ptr<IbvTransport> t,
                const OneShotPlan& plan, std::chrono::milliseconds op_timeout)
      : tcp_(std::move(tcp)),
        transport_(std::move(t)),
        guarded_(*transport_, *tcp_, aborted_),
        oneshot_(plan, guarded_, tcp_->rank()),
        plan_(plan),
        op_timeout_(op_timeout) {}

  int rank() const override { return tcp_->rank(); }
  int world() const override { return 2; }

  Status all_reduce_sum_f32(std::span<float> data, const CallControl& ctl) override {
    if (data.size_bytes() > plan_.max_bytes) return tcp_->all_reduce_sum_f32(data, ctl);
    return checked(oneshot_.all_reduce_sum_f32(data, timeout(ctl), ctl.abort));
  }
  Status all_reduce_sum_bf16(std::span<uint16_t> data, const CallControl& ctl) override {
    if (data.size_bytes() > plan_.max_bytes) return tcp_->all_reduce_sum_bf16(data, ctl);
    return checked(oneshot_.all_reduce_sum_bf16(data, timeout(ctl), ctl.abort));
  }
  Status all_gather(std::span<const std::byte> mine, std::span<std::byte> out,
                    const CallControl& ctl) override {
    return tcp_->all_gather(mine, out, ctl);
  }
  Status broadcast(std::span<std::byte> data, int root, const CallControl& ctl) override {
    return tcp_->broadcast(data, root, ctl);
  }
  Status barrier(const CallControl& ctl) override { return tcp_->barrier(ctl); }
  void abort(const std::string& reason) override {
    aborted_ = true;
    tcp_->abort(reason);
  }
  Status health() override { return tcp_->health(); }

 private:
  std::chrono::milliseconds timeout(const CallControl& ctl) const {
    return ctl.timeout.count() > 0 ? ctl.timeout : op_timeout_;
  }
  // A failed one-shot op leaves the slots undefined: poison the TCP link too, so the peer's
  // pending wait ends with the reason and health() reports it.
  Status checked(Status s) {
    if (!s.is_ok()) tcp_->abort("one-shot RDMA all-reduce failed: " + s.message());
    return s;
  }

  std::unique_ptr<TpComm> tcp_;
  std::unique_ptr<IbvTransport> transport_;
  std::atomic<bool> aborted_{false};
  GuardedTransport guarded_;
  OneShotAllReduce oneshot_;
  OneShotPlan plan_;
  std::chrono::milliseconds op_timeout_;
};

}  // namespace

Result<std::unique_ptr<TpComm>> make_tp_ibverbs(std::unique_ptr<TpComm> tcp,
                                                const IbvDeviceOptions& options, size_t max_bytes,
                                                std::chrono::milliseconds op_timeout) {
  if (tcp == nullptr || tcp->world() != 2)
    return Status(ErrorCode::kInvalidArgument, "make_tp_ibverbs needs a world-2 TCP comm");
  auto plan = plan_oneshot(max_bytes);
  if (!plan) return plan.status();
  auto transport = IbvTransport::open(options, *plan);
  // Record: byte 0 = 1 when this rank's device opened, then the 64-byte peer info.
  constexpr size_t kRecord = 1 + kIbvPeerInfoBytes;
  std::array<std::byte, kRecord> mine{};
  if (transport) {
    mine[0] = std::byte{1};
    const auto info = encode_peer_info((*transport)->local_info());
    std::memcpy(mine.data() + 1, info.data(), info.size());
  }
  std::array<std::byte, 2 * kRecord> all{};
  if (Status s = tcp->all_gather(mine, all); !s.is_ok()) return s;
  const int peer = 1 - tcp->rank();
  if (!transport) return transport.status();
  if (all[peer * kRecord] != std::byte{1})
    return Status(ErrorCode::kUnsupported,
                  fmt::format("TP rank {} could not open its RDMA device (see its log); the "
                              "one-shot RDMA all-reduce needs both ranks",
                              peer));
  auto info = decode_peer_info(std::span(all).subspan(peer * kRecord + 1, kIbvPeerInfoBytes),
                               plan->total_bytes);
  if (!info) return info.status();
  if (Status s = (*transport)->connect(*info); !s.is_ok()) {
    tcp->abort(s.message());
    return s;
  }
  // Both QPs in RTS with receives posted before either rank writes.
  if (Status s = tcp->barrier(); !s.is_ok()) return s;
  return std::unique_ptr<TpComm>(
      new TpIbverbsComm(std::move(tcp), std::move(*transport), *plan, op_timeout));
}

}  // namespace dsv41::parallel
