// libFuzzer target: the safetensors header parser must reject or accept any byte string without
// reading out of bounds; accepted headers must describe tensors inside the buffer, of sizes whose
// element count TensorInfo::numel() forms without overflow (UBSan builds trap on it).
#include <cstddef>
#include <cstdint>

#include "core/check.hpp"
#include "loader/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto h = dsv41::SafetensorsHeader::parse(data, size, "fuzz");
    for (const auto& t : h.tensors) {
      if (h.data_start + t.offset + t.nbytes > size) __builtin_trap();
      if (static_cast<uint64_t>(t.numel()) * dsv41::dtype_size(t.dtype) != t.nbytes)
        __builtin_trap();
    }
  } catch (const dsv41::detail::Failure&) {
  }
  return 0;
}
