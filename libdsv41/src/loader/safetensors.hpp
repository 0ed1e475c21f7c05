// safetensors files: header parsing with full bounds checks, mmapped tensor views, and a writer.
// Format: u64 LE header length N, N bytes of JSON {name: {dtype, shape, data_offsets}, ...,
// "__metadata__": {str: str}}, then the data section (offsets are relative to its start).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/file_mmap.hpp"
#include "quant/dtype.hpp"

namespace dsv41 {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
  int64_t numel() const;
};

// Parsed header. Throws detail::Failure(kCorruptFile) naming `origin` and the offending tensor:
// truncated header, bad JSON, nesting deeper than 8, unknown dtype, negative/overflowing shape,
// byte length != numel*size, offsets outside the data section, overlapping tensors, duplicates.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;            // sorted by offset
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;                    // 8 + header length
  static SafetensorsHeader parse(const uint8_t* data, size_t size, const std::string& origin);
};

// A tensor inside a mapped file. Valid while the owning SafetensorsFile lives.
struct TensorView {
  const TensorInfo* info = nullptr;
  const uint8_t* data = nullptr;
  const std::string* file = nullptr;
  const std::string& name() const { return info->name; }
  DType dtype() const { return info->dtype; }
  const std::vector<int64_t>& shape() const { return info->shape; }
  int64_t numel() const { return info->numel(); }
  size_t nbytes() const { return info->nbytes; }
};

class SafetensorsFile {
 public:
  // Maps and parses; throws detail::Failure naming the path.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return map_.path(); }
  const SafetensorsHeader& header() const { return header_; }
  const TensorInfo* find_info(const std::string& name) const;
  TensorView view(const TensorInfo& info) const;

 private:
  MappedFile map_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> by_name_;
};

// One tensor to write: bytes are copied verbatim (little-endian host order).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
};
// Writes a safetensors file (throws kIo / kInvalidArgument naming the path or tensor).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Convenience: tensor values as fp32 (BF16/F16/F32/F64/I8..I64/U8/F8_E4M3/F8_E8M0 elementwise).
std::vector<float> tensor_to_f32(const TensorView& t);

}  // namespace dsv41
