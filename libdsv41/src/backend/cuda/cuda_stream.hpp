// An owned, non-blocking CUDA stream (move-only).
#pragma once

#include <cuda_runtime_api.h>

namespace dsv41::cuda {

class CudaStream {
 public:
  // Creates a stream with cudaStreamNonBlocking; throws Failure on a CUDA error. high_priority:
  // the device's greatest stream priority, so its blocks are scheduled before those of default
  // streams (the forward pass's step stream, beside its SideStream lanes).
  explicit CudaStream(bool high_priority = false);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Waits for all work queued so far; throws Failure naming the first asynchronous error.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace dsv41::cuda
