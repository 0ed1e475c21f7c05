// CudaTransformer's DSpark entry points (spec §6): one draft round on the model's DeviceDspark,
// plain or profiled. The context rows are written by run_chunk (cuda_transformer.cpp).
#include "backend/cuda/forward/cuda_transformer.hpp"
#include "backend/cuda/forward/device_dspark.hpp"
#include "backend/cuda/forward/step_profile.hpp"
#include "core/check.hpp"
#include "model/dspark/dspark_drafter.hpp"

namespace dsv41::cuda {

DsparkProposal CudaTransformer::dspark_draft(DeviceSequence& seq, int32_t next,
                                             bool with_logits) const {
  DSV41_CHECK(dspark_ != nullptr, kUnsupported,
              "DSpark draft: the model was loaded without the DSpark module "
              "(Transformer::load(..., dspark = true))");
  DSV41_CHECK(!seq.poisoned_, kInternal,
              "DSpark draft: this sequence was left inconsistent by an earlier CUDA error; start a "
              "new one");
  const DsparkDraftContext c{embed_.as<uint16_t>(), head_.get(), mhc_sites_.get(), ws_.get(),
                             stream()};
  return dspark_->draft(seq, next, c, with_logits);
}

std::vector<std::pair<std::string, double>> CudaTransformer::dspark_profile(DeviceSequence& seq,
                                                                            int32_t next) const {
  DSV41_CHECK(dspark_ != nullptr, kUnsupported,
              "DSpark profile: the model was loaded without the DSpark module");
  StepProfile p;
  DsparkDraftContext c{
      embed_.as<uint16_t>(), head_.get(), mhc_sites_.get(), ws_.get(), stream(), &p};
  (void)dspark_->draft(seq, next, c, false);  // synchronises the stream
  return p.totals();
}

}  // namespace dsv41::cuda
