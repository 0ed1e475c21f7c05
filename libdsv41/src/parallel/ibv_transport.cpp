// IbvTransport (ibv_transport.hpp). Verbs calls through the IbvShim table; ibv_post_send,
// ibv_post_recv and ibv_poll_cq are inline in verbs.h (they call through ibv_context::ops).
#include "parallel/ibv_transport.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "parallel/ibv_qp_attrs.hpp"

namespace dsv41::parallel {
namespace {

constexpr int kQueueDepth = 128;  // send and receive WRs; 2 sends per op, 1 signalled
constexpr int kCqDepth = 2 * kQueueDepth;

Status io_error(const std::string& what, int err) {
  return {ErrorCode::kIo, fmt::format("ibverbs {} failed: {} ({})", what, std::strerror(err), err)};
}

}  // namespace

Result<std::unique_ptr<IbvTransport>> IbvTransport::open(const IbvDeviceOptions& options,
                                                         const OneShotPlan& plan) {
  if (options.device.empty())
    return Status(ErrorCode::kInvalidArgument,
                  "IbvDeviceOptions.device is empty (set DSV41_TP_IB_DEVICE, e.g. mlx5_0)");
  if (options.gid_index < 0 || options.gid_index > 255)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("IbvDeviceOptions.gid_index {} outside [0, 255]", options.gid_index));
  auto shim = IbvShim::load(options.library);
  if (!shim) return shim.status();
  std::unique_ptr<IbvTransport> t(new IbvTransport());
  t->shim_ = *shim;
  t->options_ = options;
  const IbvFunctions& f = t->shim_->fn();
  int n = 0;
  ibv_device** list = f.get_device_list(&n);
  std::string names;
  ibv_device* found = nullptr;
  for (int i = 0; list != nullptr && i < n; ++i) {
    const char* name = f.get_device_name(list[i]);
    names += fmt::format("{}{}", names.empty() ? "" : ", ", name != nullptr ? name : "?");
    if (name != nullptr && options.device == name) found = list[i];
  }
  if (found != nullptr) t->ctx_ = f.open_device(found);
  const int open_errno = errno;
  if (list != nullptr) f.free_device_list(list);
  if (found == nullptr)
    return Status(ErrorCode::kNotFound,
                  fmt::format("RDMA device '{}' not found (DSV41_TP_IB_DEVICE); present: {}",
                              options.device, names.empty() ? "none" : names));
  if (t->ctx_ == nullptr) return io_error("open_device(" + options.device + ")", open_errno);

  ibv_port_attr port{};
  if (int e = f.query_port(t->ctx_, options.port, &port); e != 0)
    return io_error(fmt::format("query_port({})", options.port), e);
  if (port.state != IBV_PORT_ACTIVE)
    return Status(ErrorCode::kUnsupported,
                  fmt::format("RDMA device '{}' port {} is not active (state {})", options.device,
                              options.port, static_cast<int>(port.state)));
  t->mtu_ = static_cast<uint8_t>(port.active_mtu);
  ibv_gid gid{};
  if (int e = f.query_gid(t->ctx_, options.port, options.gid_index, &gid); e != 0)
    return io_error(fmt::format("query_gid(port {}, index {})", options.port, options.gid_index),
                    e);

  if ((t->pd_ = f.alloc_pd(t->ctx_)) == nullptr) return io_error("alloc_pd", errno);
  if ((t->cq_ = f.create_cq(t->ctx_, kCqDepth, nullptr, nullptr, 0)) == nullptr)
    return io_error("create_cq", errno);
  t->region_bytes_ = plan.total_bytes;
  t->region_ = static_cast<std::byte*>(std::aligned_alloc(kOneShotAlign, plan.total_bytes));
  if (t->region_ == nullptr) return io_error("aligned_alloc of the one-shot region", ENOMEM);
  std::memset(t->region_, 0, plan.total_bytes);
  t->mr_ = f.reg_mr(t->pd_, t->region_, plan.total_bytes,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (t->mr_ == nullptr) return io_error(fmt::format("reg_mr({} bytes)", plan.total_bytes), errno);

  ibv_qp_init_attr qa{};
  qa.send_cq = t->cq_;
  qa.recv_cq = t->cq_;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 0;
  qa.cap.max_send_wr = kQueueDepth;
  qa.cap.max_recv_wr = kQueueDepth;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  if ((t->qp_ = f.create_qp(t->pd_, &qa)) == nullptr) return io_error("create_qp(RC)", errno);
  IbvQpStep init = qp_init_step(options.port);
  if (int e = f.modify_qp(t->qp_, &init.attr, init.mask); e != 0)
    return io_error("modify_qp(RESET->INIT)", e);

  t->local_.mtu = t->mtu_;
  t->local_.qpn = t->qp_->qp_num;
  t->local_.psn = initial_psn(reinterpret_cast<uintptr_t>(t->region_), t->qp_->qp_num);
  t->local_.lid = port.lid;
  t->local_.rkey = t->mr_->rkey;
  t->local_.addr = reinterpret_cast<uintptr_t>(t->region_);
  t->local_.region_bytes = plan.total_bytes;
  std::memcpy(t->local_.gid.data(), gid.raw, 16);
  // Receives for the peer's WRITE WITH IMMEDIATE flags must be posted before it reaches RTS.
  if (Status s = t->post_recvs(kQueueDepth); !s.is_ok()) return s;
  return t;
}

IbvTransport::~IbvTransport() {
  if (shim_ == nullptr) return;
  const IbvFunctions& f = shim_->fn();
  // Reverse order of creation: QP before its CQ, MR before its PD, the context last.
  if (qp_ != nullptr) f.destroy_qp(qp_);
  if (mr_ != nullptr) f.dereg_mr(mr_);
  if (cq_ != nullptr) f.destroy_cq(cq_);
  if (pd_ != nullptr) f.dealloc_pd(pd_);
  if (ctx_ != nullptr) f.close_device(ctx_);
  std::free(region_);
}

Status IbvTransport::connect(const IbvPeerInfo& peer) {
  const IbvFunctions& f = shim_->fn();
  if (peer.region_bytes != region_bytes_)
    return {ErrorCode::kInvalidArgument,
            fmt::format("peer region {} bytes, local {}", peer.region_bytes, region_bytes_)};
  IbvQpStep rtr = qp_rtr_step(peer, options_.port, options_.gid_index, mtu_);
  if (int e = f.modify_qp(qp_, &rtr.attr, rtr.mask); e != 0)
    return io_error(fmt::format("modify_qp(INIT->RTR, peer qpn {})", peer.qpn), e);
  IbvQpStep rts = qp_rts_step(local_.psn);
  if (int e = f.modify_qp(qp_, &rts.attr, rts.mask); e != 0)
    return io_error("modify_qp(RTR->RTS)", e);
  peer_ = peer;
  connected_ = true;
  return Status::ok();
}

std::span<std::byte> IbvTransport::local_region() { return {region_, region_bytes_}; }

Status IbvTransport::post_recvs(int n) {
  for (int i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = 0;
    wr.num_sge = 0;  // zero-length writes with immediate consume no buffer
    if (int e = ibv_post_recv(qp_, &wr, &bad); e != 0) return io_error("post_recv", e);
  }
  return Status::ok();
}

void IbvTransport::post_write(size_t local_offset, size_t remote_offset, size_t bytes) {
  if (!failure_.is_ok()) return;
  if (!connected_ || local_offset + bytes > region_bytes_ ||
      remote_offset + bytes > region_bytes_) {
    failure_ = {ErrorCode::kInternal,
                fmt::format("ibverbs post_write out of range or unconnected ({} + {} -> {})",
                            local_offset, bytes, remote_offset)};
    return;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(region_ + local_offset), static_cast<uint32_t>(bytes),
              mr_->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = 0;  // unsignalled: the flag's signalled completion retires it (RC order)
  wr.wr.rdma.remote_addr = peer_.addr + remote_offset;
  wr.wr.rdma.rkey = peer_.rkey;
  if (int e = ibv_post_send(qp_, &wr, &bad); e != 0)
    failure_ = io_error("post_send(RDMA_WRITE)", e);
}

void IbvTransport::post_flag(size_t remote_offset, uint64_t /*value*/) {
  if (!failure_.is_ok()) return;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = nullptr;
  wr.num_sge = 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htobe32(static_cast<uint32_t>(remote_offset / 64));
  wr.wr.rdma.remote_addr = peer_.addr + remote_offset;
  wr.wr.rdma.rkey = peer_.rkey;
  if (int e = ibv_post_send(qp_, &wr, &bad); e != 0)
    failure_ = io_error("post_send(RDMA_WRITE_WITH_IMM)", e);
}

Status IbvTransport::poll() {
  if (!failure_.is_ok()) return failure_;
  ibv_wc wc[16];
  const int n = ibv_poll_cq(cq_, 16, wc);
  if (n < 0) return failure_ = io_error("poll_cq", -n);
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS)
      return failure_ = {ErrorCode::kIo,
                         fmt::format("ibverbs completion error: status {} (opcode {}, vendor {})",
                                     static_cast<int>(wc[i].status), static_cast<int>(wc[i].opcode),
                                     wc[i].vendor_err)};
    if (wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM) continue;  // our signalled flag write
    const size_t off = size_t{be32toh(wc[i].imm_data)} * 64;
    if (off + sizeof(uint64_t) > region_bytes_)
      return failure_ = {ErrorCode::kIo,
                         fmt::format("ibverbs flag offset {} outside the region", off)};
    // Flags arrive in post order and count 1, 2, 3, ... (OneShotTransport::post_flag).
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(region_ + off))
        .store(++flags_received_, std::memory_order_release);
    if (Status s = post_recvs(1); !s.is_ok()) return failure_ = s;
  }
  return Status::ok();
}

}  // namespace dsv41::parallel
