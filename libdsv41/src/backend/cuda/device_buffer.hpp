// An owned device allocation (cudaMalloc, move-only) with blocking host copies, for tests,
// benches and the host-side owners of kernel inputs and workspaces.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv41::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // cudaMalloc of `bytes` (0 allowed: no allocation); throws Failure(kOutOfMemory) naming the
  // size when the device is full.
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  size_t bytes() const { return bytes_; }
  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

  // Host -> device at byte offset 0; throws Failure(kInvalidArgument) when src is larger than
  // the buffer. Returns when the bytes are in device memory (ordered before any later launch on
  // any stream).
  void upload(const void* src, size_t bytes);
  template <typename T>
  void upload(std::span<const T> src) {
    upload(src.data(), src.size_bytes());
  }
  // Host -> device at byte `offset` (packing several tensors into one allocation); throws
  // Failure(kInvalidArgument) when [offset, offset + bytes) leaves the buffer. Same ordering.
  void upload_at(size_t offset, const void* src, size_t bytes);
  // Host -> device of `rows` rows of `width` bytes, row r read at src + r · src_pitch, packed
  // (pitch = width) from byte 0 (a strided slice of a mapped tensor); throws
  // Failure(kInvalidArgument) when width · rows exceeds the buffer or src_pitch < width. Same
  // ordering.
  void upload_2d(const void* src, size_t src_pitch, size_t width, size_t rows);
  // Device -> host of the first `bytes`; same rules.
  void download(void* dst, size_t bytes) const;
  template <typename T>
  void download(std::span<T> dst) const {
    download(dst.data(), dst.size_bytes());
  }
  // Every byte set to `value` (poisoning outputs before a kernel writes them); complete on return.
  void fill_bytes(uint8_t value);

 private:
  static void settle();

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dsv41::cuda
