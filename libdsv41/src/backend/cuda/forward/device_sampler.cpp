// DeviceSampler: SamplePlan -> pinned staging -> sample_tokens -> 16-byte result.
#include "backend/cuda/forward/device_sampler.hpp"

#include <cstring>

#include "backend/cuda/forward/launch_check.hpp"
#include "core/check.hpp"
#include "dsv41k/sampling.hpp"

namespace dsv41::cuda {
namespace {

// The plan's structs mirror the kernel's field by field (sampling/ cannot see CUDA headers).
static_assert(sizeof(sampling::SampleAdjustment) == sizeof(kernels::SampleAdjust));
static_assert(sampling::kPlanBias == kernels::kAdjustBias &&
              sampling::kPlanRepeat == kernels::kAdjustRepeat &&
              sampling::kPlanPenalty == kernels::kAdjustPenalty);
static_assert(sizeof(sampling::DeviceSampleOutcome) == sizeof(kernels::SampleResult));

constexpr size_t kParamsBytes = 256;  // SampleRowParams + the 2 offsets, 256-aligned

size_t inputs_bytes(size_t n_adjust) {
  return kParamsBytes + std::max<size_t>(1, n_adjust) * sizeof(kernels::SampleAdjust);
}

}  // namespace

DeviceSampler::DeviceSampler(int64_t vocab)
    : vocab_(vocab),
      workspace_(kernels::sample_tokens_workspace_bytes(1, vocab)),
      inputs_(inputs_bytes(256)),
      result_(sizeof(kernels::SampleResult)),
      stage_(inputs_bytes(256)),
      stage_result_(sizeof(kernels::SampleResult)) {
  DSV41_CHECK(workspace_.bytes() > 0, kInvalidArgument,
              "device sampling: vocab_size {} is outside [1, 2^31 - 1]", vocab);
}

sampling::DeviceSampleOutcome DeviceSampler::sample(const float* logits,
                                                    const sampling::SamplePlan& plan,
                                                    cudaStream_t stream) {
  const size_t n = plan.adjustments.size();
  const size_t bytes = inputs_bytes(n);
  if (bytes > inputs_.bytes()) {  // a long history: grow both (the last call synchronised)
    inputs_ = DeviceBuffer(2 * bytes);
    stage_ = PinnedBuffer(2 * bytes);
  }
  kernels::SampleRowParams p;
  p.uniform = plan.uniform;
  p.temperature = plan.temperature;
  p.min_p = plan.min_p;
  p.top_p = plan.top_p;
  p.top_k = plan.top_k;
  p.greedy = plan.greedy ? 1 : 0;
  char* host = stage_.as<char>();
  std::memcpy(host, &p, sizeof(p));
  const int32_t offsets[2] = {0, static_cast<int32_t>(n)};
  std::memcpy(host + sizeof(p), offsets, sizeof(offsets));
  if (n > 0)
    std::memcpy(host + kParamsBytes, plan.adjustments.data(), n * sizeof(kernels::SampleAdjust));
  char* dev = inputs_.as<char>();
  check_launch(cudaMemcpyAsync(dev, host, kParamsBytes + n * sizeof(kernels::SampleAdjust),
                               cudaMemcpyHostToDevice, stream),
               -1, "sampling inputs upload");
  check_launch(
      kernels::sample_tokens(
          logits, 1, vocab_, reinterpret_cast<const kernels::SampleRowParams*>(dev),
          reinterpret_cast<const kernels::SampleAdjust*>(dev + kParamsBytes),
          reinterpret_cast<const int32_t*>(dev + sizeof(p)), nullptr,
          result_.as<kernels::SampleResult>(), workspace_.data(), workspace_.bytes(), stream),
      -1, "sample_tokens");
  check_launch(cudaMemcpyAsync(stage_result_.data(), result_.data(), sizeof(kernels::SampleResult),
                               cudaMemcpyDeviceToHost, stream),
               -1, "sampling result download");
  check_launch(cudaStreamSynchronize(stream), -1, "sampling synchronize");
  sampling::DeviceSampleOutcome o;
  std::memcpy(&o, stage_result_.data(), sizeof(o));
  return o;
}

}  // namespace dsv41::cuda
