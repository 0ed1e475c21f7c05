// DeviceTp: the tensor-parallel collectives of the CUDA forward (docs/tp.md "CUDA backend") on
// device buffers, over any TpComm (TpTcp, TpNccl, the one-shot RDMA all-reduce). Each call
// waits for the forward stream, then: host transports get the operand copied to pinned host
// memory and the result queued back on the stream; a TpComm that takes device memory (TpNccl,
// DSV41_TP_NCCL) gets the device buffer itself (its own stream, complete when the call returns).
// Correct over every transport and bit-identical on both ranks (TpComm sums in rank order; two
// ranks' fp32 sum is the same either way), but a host sync per call, so a tensor-parallel step
// cannot be captured into a CUDA graph. NCCL has not run on two GPUs yet (issue 8).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/pinned_buffer.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::cuda {

class DeviceTp {
 public:
  // comm must outlive this and have world >= 2. Pinned staging: max_reduce floats (all-reduce
  // [chunk, hidden]) and max_gather floats per rank (the logits gather's block).
  DeviceTp(parallel::TpComm& comm, int64_t max_reduce, int64_t max_gather);

  int rank() const { return comm_->rank(); }
  int world() const { return comm_->world(); }

  // data[0, n) (device) = the sum over ranks (TpComm::all_reduce_sum_f32), on `stream`. Throws
  // detail::Failure with the TpComm status' code, naming `what` (e.g. "layer 3 attention").
  void all_reduce_sum(float* data, int64_t n, cudaStream_t stream, const char* what);
  // Every rank's mine[n] (device), in rank order, as [world, n] floats in pinned host memory
  // (the return value): valid, and safe to queue copies from on `stream`, until the next call
  // (which synchronises `stream` before overwriting it).
  const float* all_gather(const float* mine, int64_t n, cudaStream_t stream, const char* what);

 private:
  parallel::TpComm* comm_;
  int64_t max_reduce_, max_gather_;
  PinnedBuffer send_;    // host transports only: the operand's staging
  PinnedBuffer recv_;    // [world, max_gather] floats: the gathered logits the caller reads
  DeviceBuffer gather_;  // takes_device_memory: [world, max_gather] floats, the gather's target
};

}  // namespace dsv41::cuda
