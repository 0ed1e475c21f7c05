// CudaTransformer's DSpark entry points (spec §6): one draft round on the model's DeviceDspark,
// plain or profiled. The context rows are written by run_chunk (cuda_transformer.cpp).
#include "backend/cuda/forward/cuda_transformer.hpp"
#include "backend/cuda/forward/device_dspark.hpp"
#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/device_tp.hpp"
#include "backend/cuda/forward/forward_workspace.hpp"
#include "backend/cuda/forward/mhc_sites.hpp"
#include "backend/cuda/forward/step_profile.hpp"
#include "core/check.hpp"
#include "model/dspark/dspark_drafter.hpp"

namespace dsv41::cuda {

// The round's borrowed pieces; under tensor parallelism the head gathers every rank's vocabulary
// rows and the stages' outputs are all-reduced (the CPU drafter's collectives, in its order).
DsparkDraftContext CudaTransformer::dspark_context(StepProfile* profile) const {
  DsparkDraftContext c;
  c.embed = embed_.as<uint16_t>();
  c.head_logits = [this](const float* x, int64_t rows) {
    if (tp_) {
      gather_logits(x, rows);
    } else {
      head_->gemv(x, rows, ws_->logits.as<float>(), stream());
    }
  };
  if (tp_) {
    c.all_reduce = [this](float* y, int64_t n, const char* what) {
      tp_->all_reduce_sum(y, n, stream(), what);
    };
  }
  c.sites = mhc_sites_.get();
  c.ws = ws_.get();
  c.stream = stream();
  c.profile = profile;
  return c;
}

DsparkProposal CudaTransformer::dspark_draft(DeviceSequence& seq, int32_t next,
                                             bool with_logits) const {
  DSV41_CHECK(dspark_ != nullptr, kUnsupported,
              "DSpark draft: the model was loaded without the DSpark module "
              "(Transformer::load(..., dspark = true))");
  DSV41_CHECK(!seq.poisoned_, kInternal,
              "DSpark draft: this sequence was left inconsistent by an earlier CUDA error; start a "
              "new one");
  return dspark_->draft(seq, next, dspark_context(nullptr), with_logits);
}

std::vector<std::pair<std::string, double>> CudaTransformer::dspark_profile(DeviceSequence& seq,
                                                                            int32_t next) const {
  DSV41_CHECK(dspark_ != nullptr, kUnsupported,
              "DSpark profile: the model was loaded without the DSpark module");
  StepProfile p;
  (void)dspark_->draft(seq, next, dspark_context(&p), false);  // synchronises the stream
  return p.totals();
}

}  // namespace dsv41::cuda
