// The EXL3 routed experts of one layer (a Spark checkpoint's banks, spec exl3-format.md §4) in
// device memory, for moe_grouped_exl3_gemv: per expert one allocation holding its three
// projections' trellis, suh and svh, copied straight from the mapped bank files (no host copy);
// per projection a device array of Exl3MoeMatrix records and a table of pointers to them, null
// for the layer's experts that are not in the bank (release FP4 experts, computed by the FP4
// tables of DeviceMoe from the same permutation).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.hpp"
#include "exl3/expert_bank.hpp"

namespace dsv41::cuda {

class DeviceExl3Experts {
 public:
  DeviceExl3Experts() = default;
  // Experts [expert_begin, expert_end) of `layer` (a tensor-parallel rank's range; all of them
  // at world 1) that the bank supplies (bank.find), indexed from expert_begin in the tables.
  // hidden / inter: the model's dims; every bank matrix must be (pad128(in), pad128(out)) of its
  // projection (spec §2.1), else kCorruptFile naming the tensor. Throws kUnsupported naming the
  // tensor for what the kernel does not run: a codebook other than MUL1, K outside 2..5, a bias.
  static DeviceExl3Experts upload(const exl3::ExpertBank& bank, int layer, int expert_begin,
                                  int expert_end, int64_t hidden, int64_t inter);

  bool empty() const { return count_ == 0; }
  int count() const { return count_; }
  // Whether model expert `expert` (not the local index) is in the bank.
  bool has(int expert) const {
    return expert >= first_ && expert < first_ + n_experts_ && present_[expert - first_];
  }
  // Device array [expert_end - expert_begin] (local index) of `const Exl3MoeMatrix*` (cast to the
  // descriptor tables' type).
  const uint8_t* const* table(exl3::ExpertProj p) const {
    return tables_[static_cast<int>(p)].as<const uint8_t* const>();
  }
  int max_k() const { return max_k_; }
  int64_t hidden_padded() const { return hidden_p_; }
  int64_t inter_padded() const { return inter_p_; }
  uint64_t device_bytes() const;
  // Bytes of the bank experts' three projections (trellis + suh + svh) summed.
  uint64_t expert_bytes_total() const { return expert_bytes_; }

 private:
  int first_ = 0, n_experts_ = 0, count_ = 0, max_k_ = 0;
  int64_t hidden_p_ = 0, inter_p_ = 0;
  std::vector<bool> present_;
  std::vector<DeviceBuffer> experts_;    // one allocation per bank expert
  std::array<DeviceBuffer, 3> records_;  // Exl3MoeMatrix [n_experts] per ExpertProj
  std::array<DeviceBuffer, 3> tables_;   // const Exl3MoeMatrix* [n_experts] per ExpertProj
  uint64_t expert_bytes_ = 0;
};

}  // namespace dsv41::cuda
