// IbvTransport: the OneShotTransport over libibverbs (loaded only through IbvShim, so no
// link-time dependency): device opened by name, PD, CQ, one registered region of
// OneShotPlan::total_bytes, one RC QP driven INIT -> RTR -> RTS with the peer's IbvPeerInfo.
// Data goes as IBV_WR_RDMA_WRITE (unsignalled); each flag is a zero-length
// IBV_WR_RDMA_WRITE_WITH_IMM (signalled, imm = remote offset / 64), and the receiver stores its
// flag count at that offset when the receive completion arrives, which the verbs spec orders
// after all earlier writes of the QP. COMPILED AND UNIT-TESTED ONLY (open errors): NOT VERIFIED
// ON RDMA HARDWARE (docs/tp.md "One-shot RDMA transport").
#pragma once

#include <memory>
#include <string>

#include "dsv41/status.hpp"
#include "parallel/ibv_peer_info.hpp"
#include "parallel/ibv_shim.hpp"
#include "parallel/oneshot_allreduce.hpp"

namespace dsv41::parallel {

struct IbvDeviceOptions {
  std::string library = IbvShim::kDefaultLibrary;
  std::string device;  // e.g. "rocep1s0f0" / "mlx5_0" (DSV41_TP_IB_DEVICE)
  uint8_t port = 1;
  int gid_index = 3;  // DSV41_TP_IB_GID_INDEX (RoCE v2 IPv4 GID: check `show_gids` per NIC)
};

class IbvTransport final : public OneShotTransport {
 public:
  // kUnsupported naming the library when libibverbs.so.1 is absent, kInvalidArgument for an
  // empty device name, kNotFound naming the device and listing the present ones, kIo naming the
  // verbs call that failed (errno text).
  static Result<std::unique_ptr<IbvTransport>> open(const IbvDeviceOptions& options,
                                                    const OneShotPlan& plan);
  ~IbvTransport() override;

  // Send this to the peer (all_gather over the TCP link), then connect() with its.
  const IbvPeerInfo& local_info() const { return local_; }
  // INIT -> RTR -> RTS against the peer; kIo naming the transition on failure.
  Status connect(const IbvPeerInfo& peer);

  std::span<std::byte> local_region() override;
  void post_write(size_t local_offset, size_t remote_offset, size_t bytes) override;
  void post_flag(size_t remote_offset, uint64_t value) override;
  Status poll() override;

 private:
  IbvTransport() = default;
  Status post_recvs(int n);

  std::shared_ptr<const IbvShim> shim_;
  IbvDeviceOptions options_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::byte* region_ = nullptr;
  size_t region_bytes_ = 0;
  uint8_t mtu_ = 0;
  IbvPeerInfo local_;
  IbvPeerInfo peer_;
  bool connected_ = false;
  uint64_t flags_received_ = 0;
  Status failure_;  // first post / completion error, returned by every later poll()
};

}  // namespace dsv41::parallel
