// TpNccl (tp_nccl.hpp). COMPILE-ONLY: not run on hardware here.
#include "parallel/tp_nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <mutex>
#include <thread>

#include "core/check.hpp"

namespace dsv41::parallel {
namespace {

class TpNcclComm final : public TpComm {
 public:
  TpNcclComm(std::unique_ptr<TpComm> bootstrap, ncclComm_t comm, cudaStream_t stream)
      : bootstrap_(std::move(bootstrap)), comm_(comm), stream_(stream) {}
  ~TpNcclComm() override {
    if (comm_ != nullptr) (failed_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_));
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return bootstrap_->rank(); }
  int world() const override { return bootstrap_->world(); }

  Status all_reduce_sum_f32(std::span<float> data, const CallControl& ctl) override {
    return run("all_reduce_sum_f32", ctl, [&] {
      return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm_,
                           stream_);
    });
  }
  Status all_reduce_sum_bf16(std::span<uint16_t> data, const CallControl& ctl) override {
    return run("all_reduce_sum_bf16", ctl, [&] {
      return ncclAllReduce(data.data(), data.data(), data.size(), ncclBfloat16, ncclSum, comm_,
                           stream_);
    });
  }
  Status all_gather(std::span<const std::byte> mine, std::span<std::byte> out,
                    const CallControl& ctl) override {
    if (out.size() != 2 * mine.size())
      return {ErrorCode::kInvalidArgument,
              fmt::format("all_gather: out has {} bytes, world 2 x {} bytes expected", out.size(),
                          mine.size())};
    return run("all_gather", ctl, [&] {
      return ncclAllGather(mine.data(), out.data(), mine.size(), ncclUint8, comm_, stream_);
    });
  }
  Status broadcast(std::span<std::byte> data, int root, const CallControl& ctl) override {
    if (root < 0 || root > 1)
      return {ErrorCode::kInvalidArgument, fmt::format("broadcast: root {} outside [0, 2)", root)};
    return run("broadcast", ctl, [&] {
      return ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_);
    });
  }
  Status barrier(const CallControl& ctl) override { return bootstrap_->barrier(ctl); }
  bool takes_device_memory() const override { return true; }
  Status health() override {
    {
      std::lock_guard lock(mu_);
      if (!failure_.is_ok()) return failure_;
    }
    return bootstrap_->health();
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(mu_);
      if (failure_.is_ok()) failure_ = Status(ErrorCode::kAborted, "TP aborted locally: " + reason);
    }
    bootstrap_->abort(reason);
  }

 private:
  template <typename Launch>
  Status run(const char* op, const CallControl& ctl, Launch&& launch) {
    {
      std::lock_guard lock(mu_);
      if (!failure_.is_ok()) return failure_;
    }
    // Default per-call bound: NCCL small all-reduces take ~30-130 us
    // (performance-anchors.md §2.2); 30 s only trips on a dead peer or a wedged
    // fabric.
    auto timeout = ctl.timeout.count() > 0 ? ctl.timeout : std::chrono::milliseconds(30000);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    ncclResult_t r = launch();
    Status s = Status::ok();
    for (;;) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (r != ncclSuccess && r != ncclInProgress) {
        s = Status(ErrorCode::kAborted, fmt::format("{}: NCCL {}", op, ncclGetErrorString(r)));
      } else if (async != ncclSuccess && async != ncclInProgress) {
        s = Status(ErrorCode::kAborted, fmt::format("{}: NCCL async error {} (peer lost?)", op,
                                                    ncclGetErrorString(async)));
      } else if (async == ncclSuccess) {
        cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return Status::ok();
        if (q != cudaErrorNotReady)
          s = Status(ErrorCode::kAborted, fmt::format("{}: CUDA {}", op, cudaGetErrorString(q)));
      }
      if (s.is_ok() && ctl.abort != nullptr && ctl.abort->load())
        s = Status(ErrorCode::kAborted, fmt::format("{}: aborted by the caller", op));
      // The TCP bootstrap's heartbeat and abort() end a pending collective too (a stopped or
      // vanished peer otherwise cost the whole 30 s deadline).
      if (s.is_ok()) {
        const Status link = bootstrap_->health();
        if (!link.is_ok())
          s = Status(ErrorCode::kAborted, fmt::format("{}: {}", op, link.message()));
      }
      if (s.is_ok() && std::chrono::steady_clock::now() >= deadline)
        s = Status(ErrorCode::kTimeout,
                   fmt::format("{}: not complete within {} ms", op, timeout.count()));
      if (!s.is_ok()) break;
      std::this_thread::yield();
    }
    std::lock_guard lock(mu_);
    failed_ = true;
    if (failure_.is_ok()) failure_ = s;
    ncclCommAbort(comm_);
    comm_ = nullptr;
    bootstrap_->abort(s.message());
    return s;
  }

  std::unique_ptr<TpComm> bootstrap_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  std::mutex mu_;
  Status failure_;
  bool failed_ = false;
};

}  // namespace

Result<std::unique_ptr<TpComm>> make_tp_nccl(std::unique_ptr<TpComm> bootstrap, int cuda_device,
                                             std::chrono::milliseconds init_timeout) {
  if (bootstrap == nullptr || bootstrap->world() != 2)
    return Status(ErrorCode::kInvalidArgument, "make_tp_nccl needs a connected world-2 bootstrap");
  if (cudaSetDevice(cuda_device) != cudaSuccess)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("make_tp_nccl: cudaSetDevice({}) failed", cuda_device));
  ncclUniqueId id{};
  if (bootstrap->rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    return Status(ErrorCode::kUnsupported, "ncclGetUniqueId failed (no usable NCCL network?)");
  Status s = bootstrap->broadcast(
      std::as_writable_bytes(std::span(reinterpret_cast<char*>(&id), sizeof(id))), 0);
  if (!s.is_ok()) return s;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and collectives return ncclInProgress: pollable and abortable
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, bootstrap->rank(), &config);
  auto deadline = std::chrono::steady_clock::now() + init_timeout;
  Status link = Status::ok();
  while (r == ncclInProgress || r == ncclSuccess) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) break;
    // The other rank's setup failed and it closed the link: no need to wait for init_timeout.
    if (link = bootstrap->health(); !link.is_ok()) {
      r = ncclSystemError;
      break;
    }
    if (state != ncclInProgress || std::chrono::steady_clock::now() >= deadline) {
      r = state == ncclInProgress ? ncclSystemError : state;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    if (!link.is_ok())
      return Status(ErrorCode::kAborted,
                    fmt::format("NCCL communicator init: the TP link failed: {}", link.message()));
    return Status(ErrorCode::kAborted,
                  fmt::format("NCCL communicator init failed or timed out after {} ms: {}",
                              init_timeout.count(), ncclGetErrorString(r)));
  }
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    ncclCommAbort(comm);
    return Status(ErrorCode::kOutOfMemory, "make_tp_nccl: cudaStreamCreate failed");
  }
  return std::unique_ptr<TpComm>(new TpNcclComm(std::move(bootstrap), comm, stream));
}

}  // namespace dsv41::parallel
