#include "backend/cuda/forward/device_tp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "backend/cuda/cuda_check.hpp"
#include "core/check.hpp"

namespace dsv41::cuda {
namespace {

[[noreturn]] void fail(const Status& s, const char* what) {
  throw detail::Failure(s.code(), fmt::format("{}: {}", what, s.message()), __FILE__, __LINE__);
}

}  // namespace

DeviceTp::DeviceTp(parallel::TpComm& comm, int64_t max_reduce, int64_t max_gather)
    : comm_(&comm), max_reduce_(max_reduce), max_gather_(max_gather) {
  DSV41_CHECK(comm.world() >= 2, kInvalidArgument,
              "DeviceTp: a communicator of world {} (the CUDA forward runs world 1 without one)",
              comm.world());
  DSV41_CHECK(max_reduce > 0 && max_gather > 0, kInvalidArgument,
              "DeviceTp: staging of {} / {} floats", max_reduce, max_gather);
  recv_ = PinnedBuffer(static_cast<size_t>(max_gather) * comm.world() * 4);
  // A device-memory comm needs no send staging (42 MB of pinned memory at a 2048-row chunk,
  // which on GB10 comes out of the same 128 GB as everything else), only the gather's target.
  if (comm.takes_device_memory()) {
    gather_ = DeviceBuffer(static_cast<size_t>(max_gather) * comm.world() * 4);
  } else {
    send_ = PinnedBuffer(static_cast<size_t>(std::max(max_reduce, max_gather)) * 4);
  }
}

void DeviceTp::all_reduce_sum(float* data, int64_t n, cudaStream_t stream, const char* what) {
  DSV41_CHECK(n >= 0 && n <= max_reduce_, kInternal, "{} all-reduce: {} floats, staging holds {}",
              what, n, max_reduce_);
  if (n == 0) return;
  if (comm_->takes_device_memory()) {  // the device buffer itself, once the stream produced it
    DSV41_CUDA_CHECK(cudaStreamSynchronize(stream));
    const Status s = comm_->all_reduce_sum_f32(std::span<float>(data, static_cast<size_t>(n)));
    if (!s.is_ok()) fail(s, what);
    return;
  }
  // The previous call's upload from send_ is ordered before this download on the same stream.
  DSV41_CUDA_CHECK(cudaMemcpyAsync(send_.data(), data, static_cast<size_t>(n) * 4,
                                   cudaMemcpyDeviceToHost, stream));
  DSV41_CUDA_CHECK(cudaStreamSynchronize(stream));
  const Status s = comm_->all_reduce_sum_f32(std::span<float>(send_.as<float>(), n));
  if (!s.is_ok()) fail(s, what);
  DSV41_CUDA_CHECK(cudaMemcpyAsync(data, send_.data(), static_cast<size_t>(n) * 4,
                                   cudaMemcpyHostToDevice, stream));
}

const float* DeviceTp::all_gather(const float* mine, int64_t n, cudaStream_t stream,
                                  const char* what) {
  DSV41_CHECK(n > 0 && n <= max_gather_, kInternal, "{} all-gather: {} floats, staging holds {}",
              what, n, max_gather_);
  if (comm_->takes_device_memory()) {
    // The sync also orders the caller's copies out of recv_ before it is overwritten below.
    DSV41_CUDA_CHECK(cudaStreamSynchronize(stream));
    const size_t bytes = static_cast<size_t>(n) * 4;
    const Status s = comm_->all_gather(
        std::as_bytes(std::span<const float>(mine, static_cast<size_t>(n))),
        std::as_writable_bytes(std::span<float>(gather_.as<float>(), n * comm_->world())));
    if (!s.is_ok()) fail(s, what);
    DSV41_CUDA_CHECK(cudaMemcpyAsync(recv_.data(), gather_.data(), bytes * comm_->world(),
                                     cudaMemcpyDeviceToHost, stream));
    DSV41_CUDA_CHECK(cudaStreamSynchronize(stream));
    return recv_.as<float>();
  }
  // Also orders the caller's copies out of recv_ (queued after the previous call) before the
  // collective overwrites it.
  DSV41_CUDA_CHECK(cudaMemcpyAsync(send_.data(), mine, static_cast<size_t>(n) * 4,
                                   cudaMemcpyDeviceToHost, stream));
  DSV41_CUDA_CHECK(cudaStreamSynchronize(stream));
  const Status s = comm_->all_gather(
      std::as_bytes(std::span<const float>(send_.as<float>(), n)),
      std::as_writable_bytes(std::span<float>(recv_.as<float>(), n * comm_->world())));
  if (!s.is_ok()) fail(s, what);
  return recv_.as<float>();
}

}  // namespace dsv41::cuda
