// DeviceSampler: the host owner of kernels::sample_tokens for one row of device logits (the last
// token of a forward step): its workspace, the staged plan and the result. One per
// CudaTransformer stream; not thread-safe (the CUDA backend serialises calls). See
// docs/cuda_forward.md "Sampling on the device".
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/pinned_buffer.hpp"
#include "sampling/device_sample_plan.hpp"

namespace dsv41::cuda {

class DeviceSampler {
 public:
  explicit DeviceSampler(int64_t vocab);
  // Samples logits [vocab] (device memory, ready in stream order) with plan; waits for the
  // result (the only host sync: 16 bytes). Throws Failure naming the CUDA call on errors.
  sampling::DeviceSampleOutcome sample(const float* logits, const sampling::SamplePlan& plan,
                                       cudaStream_t stream);

 private:
  int64_t vocab_;
  DeviceBuffer workspace_;
  DeviceBuffer inputs_;  // [params | offsets | adjustments], grown with the adjustment list
  DeviceBuffer result_;  // one SampleResult
  PinnedBuffer stage_;   // host twin of inputs_
  PinnedBuffer stage_result_;
};

}  // namespace dsv41::cuda
