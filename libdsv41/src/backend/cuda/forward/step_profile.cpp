#include "backend/cuda/forward/step_profile.hpp"

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

StepProfile::~StepProfile() {
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
}

void StepProfile::mark(const char* name, cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  DSV41_CUDA_CHECK(cudaEventCreate(&e));
  events_.push_back(e);
  names_.emplace_back(name);
  DSV41_CUDA_CHECK(cudaEventRecord(e, stream));
}

std::vector<std::pair<std::string, double>> StepProfile::totals() const {
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 1; i < events_.size(); ++i) {
    float ms = 0;
    DSV41_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
    bool found = false;
    for (auto& [n, t] : out)
      if (n == names_[i]) {
        t += ms;
        found = true;
      }
    if (!found) out.emplace_back(names_[i], ms);
  }
  return out;
}

}  // namespace dsv41::cuda
