#include "backend/cuda/pinned_buffer.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <string>
#include <utility>

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMallocHost(&ptr_, bytes);
  if (e != cudaSuccess) {
    ptr_ = nullptr;
    bytes_ = 0;
    const std::string what = fmt::format("cudaMallocHost of {} bytes", bytes);
    check_cuda(e, what.c_str());
  }
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_ != nullptr) (void)cudaFreeHost(ptr_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) (void)cudaFreeHost(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace dsv41::cuda
