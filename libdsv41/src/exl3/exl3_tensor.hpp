// One stored EXL3 linear layer (spec exl3-format.md §1.2, §2.2): the validated, zero-copy view of
// its tensors `<prefix>.{trellis, suh|su, svh|sv, mcg|mul1, bias}` inside a mapped file.
// Orientation: EXL3 stores W as (k, n) = (in_features, out_features) and computes y = x·W, the
// transpose of nn.Linear's weight [out, in].
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exl3/codebook.hpp"
#include "loader/safetensors.hpp"

namespace dsv41::exl3 {

// Sign·scale vector: F16 `suh`/`svh` [len], or legacy packed signs `su`/`sv` I16 [len/16] where bit
// i of word w set means element 16w+i is -1, else +1.
struct SignScale {
  const uint8_t* data = nullptr;  // file bytes, any alignment
  bool packed_signs = false;
  int64_t length = 0;
  void to_f32(float* out) const;  // writes `length` values
};

struct Exl3Tensor {
  std::string prefix;  // e.g. "layers.3.ffn.experts.7.w1"
  std::string origin;  // file the tensors live in (for messages)
  int64_t k = 0;       // in_features  = 16 * trellis.shape[0]
  int64_t n = 0;       // out_features = 16 * trellis.shape[1]
  int K = 0;           // bits per weight = trellis.shape[2] / 16
  Codebook codebook = Codebook::k3Inst;
  const uint8_t* trellis = nullptr;  // int16 [k/16][n/16][16K], C order, any alignment
  SignScale suh, svh;
  const uint8_t* bias = nullptr;  // optional [n], F16 or F32
  DType bias_dtype = DType::kF16;
  uint64_t stored_bytes = 0;  // every tensor of the prefix

  int64_t tiles_k() const { return k / 16; }
  int64_t tiles_n() const { return n / 16; }
  size_t tile_bytes() const { return 32 * static_cast<size_t>(K); }  // 16K int16
  const uint8_t* tile(int64_t tk, int64_t tn) const {
    return trellis + static_cast<size_t>(tk * tiles_n() + tn) * tile_bytes();
  }
};

// Validates the tensors named `<prefix>.<suffix>` (`parts` = (suffix, view) pairs). Throws
// detail::Failure naming `origin`, the prefix and the offending tensor: no trellis, unknown suffix,
// wrong dtype/rank, last dim not a multiple of 16, K outside 1..8, k or n not a multiple of 128,
// both or neither of suh/su (svh/sv), suh/svh length != k/n, both markers, bias length != n.
Exl3Tensor parse_exl3_tensor(const std::string& prefix,
                             const std::vector<std::pair<std::string, TensorView>>& parts,
                             const std::string& origin);

// parse_exl3_tensor over every tensor of `file` whose name starts with `<prefix>.`.
Exl3Tensor load_exl3_tensor(const SafetensorsFile& file, const std::string& prefix);

}  // namespace dsv41::exl3
