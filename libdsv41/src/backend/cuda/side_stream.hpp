// A second stream that runs work beside a main stream and rejoins it (move-only): fork() makes
// the side stream wait for everything queued on the main stream so far, done() marks the end of
// the side work, join() makes the main stream wait for it. Under stream capture the fork and
// join become graph edges, so a captured step has the same branches (the side stream must be
// joined before the capture ends). The forward pass runs each mHC site's mixes here, beside its
// sublayer (docs/cuda_forward.md "mHC mixes beside the sublayer").
#pragma once

#include <cuda_runtime_api.h>

namespace dsv41::cuda {

class SideStream {
 public:
  // Creates a non-blocking stream and two events without timing; throws Failure on a CUDA error.
  SideStream();
  ~SideStream();
  SideStream(SideStream&& other) noexcept;
  SideStream& operator=(SideStream&& other) noexcept;
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t get() const { return side_; }
  // The side stream waits for the work queued on `main` so far.
  void fork(cudaStream_t main);
  // Marks the side work queued so far as what the next join() waits for.
  void done();
  // `main` waits for the side work up to the last done(); no-op when nothing is pending.
  void join(cudaStream_t main);
  bool pending() const { return pending_; }

 private:
  void release() noexcept;

  cudaStream_t side_ = nullptr;
  cudaEvent_t forked_ = nullptr;
  cudaEvent_t finished_ = nullptr;
  bool pending_ = false;
};

}  // namespace dsv41::cuda
