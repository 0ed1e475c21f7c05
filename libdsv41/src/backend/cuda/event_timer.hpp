// Device-side timing of work on one stream with a pair of CUDA events (benches, METHOD.md:
// events around the region, never host clocks around asynchronous launches).
#pragma once

#include <cuda_runtime_api.h>

namespace dsv41::cuda {

class EventTimer {
 public:
  EventTimer();  // throws Failure on a CUDA error
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start(cudaStream_t stream);
  void stop(cudaStream_t stream);
  // Milliseconds between start and stop; waits for the stop event.
  float elapsed_ms() const;

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace dsv41::cuda
