#include "backend/cuda/device_buffer.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    ptr_ = nullptr;
    bytes_ = 0;
    const std::string what = fmt::format("cudaMalloc of {} bytes", bytes);
    check_cuda(e, what.c_str());
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* src, size_t bytes) { upload_at(0, src, bytes); }

void DeviceBuffer::upload_at(size_t offset, const void* src, size_t bytes) {
  DSV41_CHECK(offset <= bytes_ && bytes <= bytes_ - offset, kInvalidArgument,
              "upload of {} bytes at offset {} into a {}-byte device buffer", bytes, offset,
              bytes_);
  if (bytes == 0) return;
  DSV41_CUDA_CHECK(
      cudaMemcpy(static_cast<uint8_t*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice));
  settle();
}

void DeviceBuffer::upload_2d(const void* src, size_t src_pitch, size_t width, size_t rows) {
  DSV41_CHECK(src_pitch >= width && (rows == 0 || width <= bytes_ / rows), kInvalidArgument,
              "2-D upload of {} rows x {} bytes (source pitch {}) into a {}-byte device buffer",
              rows, width, src_pitch, bytes_);
  if (width == 0 || rows == 0) return;
  DSV41_CUDA_CHECK(cudaMemcpy2D(ptr_, width, src, src_pitch, width, rows, cudaMemcpyHostToDevice));
  settle();
}

void DeviceBuffer::download(void* dst, size_t bytes) const {
  DSV41_CHECK(bytes <= bytes_, kInvalidArgument,
              "download of {} bytes from a {}-byte device buffer", bytes, bytes_);
  if (bytes != 0) DSV41_CUDA_CHECK(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(uint8_t value) {
  if (bytes_ == 0) return;
  DSV41_CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
  settle();
}

// cudaMemset and a pageable cudaMemcpy to the device may still be running on the legacy stream
// when they return, and the engine's streams are non-blocking (no implicit order with it): a
// kernel launched next could read the buffer before the bytes land, or be overwritten by the
// memset afterwards (seen as poisoned test outputs on the H200, 7 of 76 kernel tests in one run).
void DeviceBuffer::settle() { DSV41_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy)); }

}  // namespace dsv41::cuda
