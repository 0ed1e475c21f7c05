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

class ExpertStore final : public ProjectionProvider {
 public:
  // Either may be null: no bank (no plan) or no native checkpoint. Both must outlive the store.
  ExpertStore(const ExpertBank* bank, const Checkpoint* native);

  bool has(int layer, int expert) const override;
  ExpertShape shape(int layer, int expert, ExpertProj proj) const override;
  void linear(int layer, int expert, ExpertProj proj, const float* x, size_t rows, float* y,
              ThreadPool* pool = nullptr) const override;

 private:
  bool in_bank_range(int expert) const;
  const BankExpert* exl3(int layer, int expert) const;

  const ExpertBank* bank_;
  const Checkpoint* native_;
};

}  // namespace dsv41::exl3
