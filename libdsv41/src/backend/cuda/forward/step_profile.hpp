// Where the device time of one forward step goes (benchmarks): CUDA events recorded on the
// stream at segment boundaries; after a sync, the milliseconds of every segment name summed over
// the layers. Recording an event per segment serialises nothing but adds ~2 µs per mark, so
// profiled steps are slightly slower than plain ones.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

namespace dsv41::cuda {

class StepProfile {
 public:
  StepProfile() = default;
  ~StepProfile();
  StepProfile(const StepProfile&) = delete;
  StepProfile& operator=(const StepProfile&) = delete;

  // Records an event that closes the segment `name` (the time since the previous mark).
  void mark(const char* name, cudaStream_t stream);
  // Call after the stream has been synchronised: (segment, ms) in first-seen order.
  std::vector<std::pair<std::string, double>> totals() const;

 private:
  std::vector<cudaEvent_t> events_;
  std::vector<std::string> names_;
};

// mark() on a null profile is a no-op, so the forward code calls this unconditionally.
inline void profile_mark(StepProfile* p, const char* name, cudaStream_t stream) {
  if (p != nullptr) p->mark(name, stream);
}

}  // namespace dsv41::cuda
