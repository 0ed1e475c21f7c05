#include "backend/cuda/event_timer.hpp"

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

EventTimer::EventTimer() {
  DSV41_CUDA_CHECK(cudaEventCreate(&start_));
  const cudaError_t e = cudaEventCreate(&stop_);
  if (e != cudaSuccess) {
    (void)cudaEventDestroy(start_);
    check_cuda(e, "cudaEventCreate(&stop_)");
  }
}

EventTimer::~EventTimer() {
  (void)cudaEventDestroy(start_);
  (void)cudaEventDestroy(stop_);
}

void EventTimer::start(cudaStream_t stream) { DSV41_CUDA_CHECK(cudaEventRecord(start_, stream)); }

void EventTimer::stop(cudaStream_t stream) { DSV41_CUDA_CHECK(cudaEventRecord(stop_, stream)); }

float EventTimer::elapsed_ms() const {
  DSV41_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0.0f;
  DSV41_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace dsv41::cuda
