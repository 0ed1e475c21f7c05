// CUDA runtime status -> dsv41::detail::Failure (core/check.hpp), naming the call and the error.
#pragma once

#include <cuda_runtime_api.h>

#include "core/check.hpp"

namespace dsv41::cuda {

// Throws Failure (kOutOfMemory for cudaErrorMemoryAllocation, else kInternal) with
// "<what>: <cudaGetErrorName> (<cudaGetErrorString>)".
void check_cuda(cudaError_t status, const char* what);

}  // namespace dsv41::cuda

// DSV41_CUDA_CHECK(cudaMemcpy(...)): the failing expression is the message's subject.
#define DSV41_CUDA_CHECK(expr) ::dsv41::cuda::check_cuda((expr), #expr)
