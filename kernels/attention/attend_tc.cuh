// Tensor-core attention core for prefill chunks (attend_tc.cu), called by
// window_sparse_attention() for T >= kAttendTcMinTokens when head_dim is one of 64, 128, 256, 512.
// Same inputs and output as the split-key kernel (attend_common.cuh AttendArgs; `part`, `splits`,
// `tiles_per_split` unused); the inverse RoPE is left to the caller.
#pragma once

#include <cuda_runtime_api.h>

#include "attention/attend_common.cuh"

namespace dsv41::kernels::detail {

// From 32 tokens on, every (token, 16-head group) block has a full tile pass of its own and the
// split-key kernel already runs one split per block (its plan: T · heads/8 >= 256 blocks), so
// the tensor-core blocks lose nothing to parallelism. Below it decode-sized calls keep the
// split-key kernel (several splits per token fill the SMs).
inline constexpr int64_t kAttendTcMinTokens = 32;

bool attend_tc_supported(int head_dim);
// cudaErrorInvalidValue when the shared-memory opt-in is refused; else the launch's error.
cudaError_t attend_tc(const AttendArgs& a, cudaStream_t stream);

}  // namespace dsv41::kernels::detail
