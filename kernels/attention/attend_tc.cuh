// Tensor-core attention core (attend_tc.cu), called by window_sparse_attention() for every call
// whose head_dim is one of 64, 128, 256, 512. Same inputs and output as the split-key kernel
// (attend_common.cuh AttendArgs): with splits > 1 it writes the split partials to `part` for
// window_sparse_attention.cu's combine_kernel; with one split it writes o normalised and leaves
// the inverse RoPE to the caller.
#pragma once

#include <cuda_runtime_api.h>

#include "attention/attend_common.cuh"

namespace dsv41::kernels::detail {

// From 32 tokens on, every (token, 16-head group) block has a full tile pass of its own (T · 4
// blocks at the released 64 heads), so one split per block; below it the key list is split.
inline constexpr int64_t kAttendTcMinTokens = 32;
inline constexpr int kAttendTcKeys = 32;   // keys per tile
inline constexpr int kAttendTcHeads = 16;  // heads per block

bool attend_tc_supported(int head_dim);
// cudaErrorInvalidValue when the shared-memory opt-in is refused; else the launch's error.
cudaError_t attend_tc(const AttendArgs& a, cudaStream_t stream);

}  // namespace dsv41::kernels::detail
