// Launch status -> Failure naming where in the forward pass it happened ("layer 4 indexer_scores:
// cudaErrorInvalidValue (...)"); a kernel's cudaErrorInvalidValue means the forward passed it a
// shape outside its preconditions (kernels/include/dsv41k/*.hpp).
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <string>

#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

inline void check_launch(cudaError_t e, int layer, const char* op) {
  if (e == cudaSuccess) [[likely]]
    return;
  const std::string what = layer >= 0 ? fmt::format("layer {} {}", layer, op) : std::string(op);
  check_cuda(e, what.c_str());
}

}  // namespace dsv41::cuda
