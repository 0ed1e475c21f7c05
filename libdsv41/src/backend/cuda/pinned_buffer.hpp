// An owned page-locked host allocation (cudaMallocHost, move-only): the staging memory of
// asynchronous host<->device copies, which pageable memory would serialise (a pageable H2D copy
// waits for the stream; a captured CUDA graph cannot copy from pageable memory at all).
#pragma once

#include <cstddef>

namespace dsv41::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // Throws Failure(kOutOfMemory) naming the size when the allocation fails.
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  size_t bytes() const { return bytes_; }
  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dsv41::cuda
