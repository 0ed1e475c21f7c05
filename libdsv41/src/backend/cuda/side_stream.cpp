#include "backend/cuda/side_stream.hpp"

#include <utility>

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

SideStream::SideStream() {
  try {
    DSV41_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    DSV41_CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
    DSV41_CUDA_CHECK(cudaEventCreateWithFlags(&finished_, cudaEventDisableTiming));
  } catch (...) {
    release();
    throw;
  }
}

SideStream::~SideStream() { release(); }

void SideStream::release() noexcept {
  if (finished_ != nullptr) (void)cudaEventDestroy(finished_);
  if (forked_ != nullptr) (void)cudaEventDestroy(forked_);
  if (side_ != nullptr) (void)cudaStreamDestroy(side_);
  side_ = nullptr, forked_ = nullptr, finished_ = nullptr;
}

SideStream::SideStream(SideStream&& other) noexcept
    : side_(std::exchange(other.side_, nullptr)),
      forked_(std::exchange(other.forked_, nullptr)),
      finished_(std::exchange(other.finished_, nullptr)),
      pending_(std::exchange(other.pending_, false)) {}

SideStream& SideStream::operator=(SideStream&& other) noexcept {
  if (this != &other) {
    release();
    side_ = std::exchange(other.side_, nullptr);
    forked_ = std::exchange(other.forked_, nullptr);
    finished_ = std::exchange(other.finished_, nullptr);
    pending_ = std::exchange(other.pending_, false);
  }
  return *this;
}

void SideStream::fork(cudaStream_t main) {
  DSV41_CUDA_CHECK(cudaEventRecord(forked_, main));
  DSV41_CUDA_CHECK(cudaStreamWaitEvent(side_, forked_, 0));
}

void SideStream::done() {
  DSV41_CUDA_CHECK(cudaEventRecord(finished_, side_));
  pending_ = true;
}

void SideStream::join(cudaStream_t main) {
  if (!pending_) return;
  DSV41_CUDA_CHECK(cudaStreamWaitEvent(main, finished_, 0));
  pending_ = false;
}

}  // namespace dsv41::cuda
