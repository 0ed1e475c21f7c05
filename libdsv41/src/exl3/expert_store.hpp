// The routed experts of a Spark checkpoint directory: EXL3 from the banks for (layer, expert)
// pairs the plan assigns a K, the release's FP4 tensors `layers.L.ffn.experts.E.w{1,3,2}.{weight,
// scale}` (spec model-architecture.md §1.4) for native experts and layers absent from the plan.
#pragma once

#include <memory>
#include <string>

#include "exl3/projection_provider.hpp"

namespace dsv41 {
class Checkpoint;
class ThreadPool;
}  // namespace dsv41

namespace dsv41::exl3 {

// The model's expert dims. EXL3 stores both sides padded to a multiple of 128 (spec §2.1,
// exllamav3 `Linear` pad_to = 128): a bank matrix may be (pad128(in), pad128(out)); x is then
// zero-extended and y cut to `out`. Zero: the bank's own dims (no padding).
struct ExpertDims {
  int64_t hidden = 0;
  int64_t inter = 0;
};
constexpr int64_t pad128(int64_t n) { return (n + 127) / 128 * 128; }

class ExpertStore final : public ProjectionProvider {
 public:
  // Either may be null: no bank (no plan) or no native checkpoint. Both must outlive the store.
  // With `model` set, every bank matrix must be exactly (pad128(in), pad128(out)) of the model's
  // projection, else kCorruptFile naming the tensor.
  ExpertStore(const ExpertBank* bank, const Checkpoint* native, ExpertDims model = {});

  bool has(int layer, int expert) const override;
  ExpertShape shape(int layer, int expert, ExpertProj proj) const override;
  void linear(int layer, int expert, ExpertProj proj, const float* x, size_t rows, float* y,
              ThreadPool* pool = nullptr) const override;

 private:
  bool in_bank_range(int expert) const;
  const BankExpert* exl3(int layer, int expert) const;

  ExpertShape model_shape(ExpertProj proj) const;

  const ExpertBank* bank_;
  const Checkpoint* native_;
  ExpertDims model_;
};

}  // namespace dsv41::exl3
