// borrow_tp_comm (tp_comm.hpp): every call forwarded to a TpComm owned elsewhere.
#include "parallel/tp_comm.hpp"

namespace dsv41::parallel {
namespace {

class TpBorrowed final : public TpComm {
 public:
  explicit TpBorrowed(TpComm& target) : t_(&target) {}

  int rank() const override { return t_->rank(); }
  int world() const override { return t_->world(); }
  Status all_reduce_sum_f32(std::span<float> data, const CallControl& ctl) override {
    return t_->all_reduce_sum_f32(data, ctl);
  }
  Status all_reduce_sum_bf16(std::span<uint16_t> data, const CallControl& ctl) override {
    return t_->all_reduce_sum_bf16(data, ctl);
  }
  Status all_gather(std::span<const std::byte> mine, std::span<std::byte> out,
                    const CallControl& ctl) override {
    return t_->all_gather(mine, out, ctl);
  }
  Status broadcast(std::span<std::byte> data, int root, const CallControl& ctl) override {
    return t_->broadcast(data, root, ctl);
  }
  Status barrier(const CallControl& ctl) override { return t_->barrier(ctl); }
  void abort(const std::string& reason) override { t_->abort(reason); }
  Status health() override { return t_->health(); }
  bool takes_device_memory() const override { return t_->takes_device_memory(); }

 private:
  TpComm* t_;
};

}  // namespace

std::unique_ptr<TpComm> borrow_tp_comm(TpComm& target) {
  return std::make_unique<TpBorrowed>(target);
}

}  // namespace dsv41::parallel
