#include "backend/cuda/cuda_check.hpp"

namespace dsv41::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) [[likely]]
    return;
  if (status == cudaErrorMemoryAllocation)
    DSV41_FAIL(kOutOfMemory, "{}: {} ({})", what, cudaGetErrorName(status),
               cudaGetErrorString(status));
  DSV41_FAIL(kInternal, "{}: {} ({})", what, cudaGetErrorName(status), cudaGetErrorString(status));
}

}  // namespace dsv41::cuda
