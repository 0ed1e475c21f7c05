// TpLocal: the world-1 communicator (tp_comm.hpp). Collectives are identities
// but keep the contract: argument checks, the abort flag and the
// poisoned-after-abort rule.
#include <cstring>
#include <mutex>

#include "core/check.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::parallel {
namespace {

class TpLocal final : public TpComm {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }

  Status all_reduce_sum_f32(std::span<float>, const CallControl& ctl) override {
    return gate(TpOp::kAllReduceF32, ctl);
  }
  Status all_reduce_sum_bf16(std::span<uint16_t>, const CallControl& ctl) override {
    return gate(TpOp::kAllReduceBf16, ctl);
  }
  Status all_gather(std::span<const std::byte> mine, std::span<std::byte> out,
                    const CallControl& ctl) override {
    if (out.size() != mine.size())
      return {ErrorCode::kInvalidArgument,
              fmt::format("all_gather: out has {} bytes, world 1 x {} bytes expected", out.size(),
                          mine.size())};
    Status s = gate(TpOp::kAllGather, ctl);
    if (s && !mine.empty() && out.data() != mine.data())
      std::memmove(out.data(), mine.data(), mine.size());
    return s;
  }
  Status broadcast(std::span<std::byte>, int root, const CallControl& ctl) override {
    if (root != 0)
      return {ErrorCode::kInvalidArgument, fmt::format("broadcast: root {} outside [0, 1)", root)};
    return gate(TpOp::kBroadcast, ctl);
  }
  Status barrier(const CallControl& ctl) override { return gate(TpOp::kBarrier, ctl); }

  void abort(const std::string& reason) override {
    std::lock_guard lock(mu_);
    if (failure_.is_ok()) failure_ = Status(ErrorCode::kAborted, "tp aborted: " + reason);
  }

 private:
  Status gate(TpOp op, const CallControl& ctl) {
    if (ctl.abort != nullptr && ctl.abort->load())
      return {ErrorCode::kAborted, fmt::format("{}: aborted by caller", tp_op_name(op))};
    std::lock_guard lock(mu_);
    return failure_;
  }

  std::mutex mu_;
  Status failure_;
};

}  // namespace

std::unique_ptr<TpComm> make_tp_local() { return std::make_unique<TpLocal>(); }

}  // namespace dsv41::parallel
