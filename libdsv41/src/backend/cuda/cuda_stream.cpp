#include "backend/cuda/cuda_stream.hpp"

#include <utility>

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

CudaStream::CudaStream(bool high_priority) {
  int least = 0, greatest = 0;
  if (high_priority) DSV41_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  DSV41_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking,
                                                high_priority ? greatest : least));
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void CudaStream::synchronize() const { DSV41_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

}  // namespace dsv41::cuda
