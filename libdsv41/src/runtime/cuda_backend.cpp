// The CUDA backend: CudaTransformer + DeviceSequence behind ForwardBackend (DSV41_CUDA builds).
// One CudaTransformer has one workspace and one stream, so every call that touches the device
// (forward, rollback's copies, clone) holds the backend's mutex: sessions of one model used from
// several threads run one at a time (an Engine alone on a model never waits on it). The device
// is the one current at load (device 0 unless the caller set another).
#include <mutex>

#include "backend/cuda/forward/cuda_transformer.hpp"
#include "backend/cuda/forward/device_sampler.hpp"
#include "backend/cuda/vision/device_vision_tower.hpp"
#include "core/check.hpp"
#include "dsv41k/launchers.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"
#include "runtime/forward_backend.hpp"
#include "runtime/image_encoder.hpp"

namespace dsv41 {
namespace {

struct CudaShared {
  std::unique_ptr<cuda::CudaTransformer> gpu;
  std::unique_ptr<cuda::DeviceSampler> sampler;  // on gpu's stream, under mu
  std::mutex mu;
};

class CudaSequence final : public BackendSequence {
 public:
  CudaSequence(CudaShared& sh, cuda::DeviceSequence s) : sh_(sh), s_(std::move(s)) {}
  int64_t pos() const override { return s_.pos(); }
  const std::vector<int32_t>& tokens() const override { return s_.tokens; }
  int64_t max_context() const override { return s_.max_context(); }
  bool preallocated() const override { return true; }
  void reset() override { s_.reset(); }
  void rollback(int64_t n) override {
    std::lock_guard<std::mutex> lock(sh_.mu);
    sh_.gpu->rollback(s_, n);
  }
  std::unique_ptr<BackendSequence> clone(int64_t max_context) const override {
    std::lock_guard<std::mutex> lock(sh_.mu);
    return std::make_unique<CudaSequence>(sh_, sh_.gpu->clone(s_, max_context));
  }
  cuda::DeviceSequence& device() { return s_; }

 private:
  CudaShared& sh_;
  cuda::DeviceSequence s_;
};

class CudaBackend final : public ForwardBackend {
 public:
  CudaBackend(std::unique_ptr<cuda::CudaTransformer> gpu, int64_t vocab) {
    sh_.gpu = std::move(gpu);
    sh_.sampler = std::make_unique<cuda::DeviceSampler>(vocab);
  }
  const char* name() const override { return "cuda"; }
  int64_t max_context() const override { return sh_.gpu->options().max_context; }
  std::unique_ptr<BackendSequence> new_sequence(const StateOptions& opts) const override {
    return std::make_unique<CudaSequence>(
        sh_, sh_.gpu->new_sequence(opts.max_context, opts.max_rollback));
  }
  std::vector<float> forward(BackendSequence& seq, std::span<const int32_t> ids,
                             bool all_rows) const override {
    std::lock_guard<std::mutex> lock(sh_.mu);
    using Rows = cuda::CudaTransformer::LogitRows;
    return sh_.gpu->forward(static_cast<CudaSequence&>(seq).device(), ids, {},
                            all_rows ? Rows::kAll : Rows::kLast);
  }
  bool takes_image_embeddings() const override { return true; }
  std::vector<float> forward_image(BackendSequence& seq, std::span<const int32_t> ids,
                                   std::span<const uint8_t> flags, std::span<const float> embeds,
                                   bool all_rows) const override {
    std::lock_guard<std::mutex> lock(sh_.mu);
    using Rows = cuda::CudaTransformer::LogitRows;
    return sh_.gpu->forward(static_cast<CudaSequence&>(seq).device(), ids, flags,
                            all_rows ? Rows::kAll : Rows::kLast, embeds);
  }
  bool samples_on_device() const override { return true; }
  // The last row's logits stay on the device: one 16-byte result instead of 517 KB of logits.
  sampling::DeviceSampleOutcome forward_sample(BackendSequence& seq, std::span<const int32_t> ids,
                                               const sampling::SamplePlan& plan) const override {
    std::lock_guard<std::mutex> lock(sh_.mu);
    sh_.gpu->forward_last(static_cast<CudaSequence&>(seq).device(), ids);
    return sh_.sampler->sample(sh_.gpu->device_logits(), plan, sh_.gpu->stream());
  }
  bool has_dspark() const override { return sh_.gpu->has_dspark(); }
  std::vector<int32_t> dspark_draft(BackendSequence& seq, int32_t next, int max_tokens,
                                    float confidence_threshold) const override {
    if (!sh_.gpu->has_dspark())
      return ForwardBackend::dspark_draft(seq, next, max_tokens, confidence_threshold);
    std::lock_guard<std::mutex> lock(sh_.mu);
    const DsparkProposal p = sh_.gpu->dspark_draft(static_cast<CudaSequence&>(seq).device(), next);
    return cut_by_confidence(p, max_tokens, confidence_threshold);
  }

 private:
  mutable CudaShared sh_;
};

class CudaImageEncoder final : public ImageEncoder {
 public:
  explicit CudaImageEncoder(const vision::VisionTower& cpu)
      : tower_(cuda::DeviceVisionTower::upload(cpu)) {}
  const char* name() const override { return "cuda"; }
  std::vector<float> span(const vision::ImagePatches& patches) const override {
    return tower_->span(patches);
  }

 private:
  std::unique_ptr<cuda::DeviceVisionTower> tower_;
};

}  // namespace

std::unique_ptr<ImageEncoder> make_cuda_image_encoder(const vision::VisionTower& cpu) {
  return std::make_unique<CudaImageEncoder>(cpu);
}

std::unique_ptr<ForwardBackend> make_cuda_backend(const Transformer& t,
                                                  const CudaBackendOptions& opts) {
  // A process-wide setting of the kernel library (dsv41k/launchers.hpp), set before any launch.
  kernels::set_programmatic_launch(opts.programmatic_launch);
  cuda::CudaForwardOptions o;
  o.max_chunk = opts.max_chunk;
  o.prefill_x = static_cast<kernels::GemmX>(opts.prefill_x_parts);
  o.max_context = std::min(opts.max_context, t.config().text.max_position_embeddings);
  o.data_comm = opts.data_comm;
  o.side_streams = opts.side_streams;
  o.moe_gemm_min_rows = opts.moe_gemm_min_rows;
  o.moe_exl3_gemm_min_rows = opts.moe_exl3_gemm_min_rows;
  return std::make_unique<CudaBackend>(cuda::CudaTransformer::upload(t, o),
                                       t.config().text.vocab_size);
}

}  // namespace dsv41
