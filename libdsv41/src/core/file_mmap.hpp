// Read-only memory map of a whole file (RAII, move-only). Checkpoint tensors are views into it,
// so weights are never copied to a second host buffer (GB10 memory is unified: a copy halves it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsv41 {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws detail::Failure (kNotFound / kIo) naming the path.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace dsv41
