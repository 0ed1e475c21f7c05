// Shared by the two kernels of an mHC site (hc_site.cu: the mixes; hc_site_collapse.cu: the
// collapse + norm): the argument block, the block size and the workspace layout (the mixes'
// partials at the start, the split collapse's at the end, so one of each may run at once).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dsv41::kernels::detail::site {

inline constexpr int kThreads = 256;
inline size_t align256(size_t v) { return (v + 255) / 256 * 256; }

// Values per thread whose loads are issued together: at decode one block per token walks D = 5120
// in 20 steps of 256 threads, each an L2 round trip if it waited for its own loads. The
// per-thread order of every sum is that of one value at a time.
inline constexpr int kBatch = 4;

// The split collapse (decode) gets its own region at the end of the workspace, so it can run
// beside the mixes of the previous site that use the start: counters [kSplitMaxTokens] uint32,
// Σx² partials [kSplitMaxTokens, S] fp64, S = ceil(D / kSliceValues).
inline constexpr int64_t kSplitMaxTokens = 16;
// One batch of loads per thread.
inline constexpr int64_t kSliceValues = int64_t{kBatch} * kThreads;
// Slices up to the portable cluster size (8) run as one thread-block cluster per token
// (hc_collapse_cluster_kernel: D <= 8192); more take the counter kernel.
inline constexpr int64_t kClusterMaxSlices = 8;
inline int64_t slices_for(int64_t D) { return (D + kSliceValues - 1) / kSliceValues; }
inline size_t collapse_region_bytes(int64_t D) {
  return align256(kSplitMaxTokens * 4 + static_cast<size_t>(kSplitMaxTokens * slices_for(D)) * 8);
}
// Byte offset of that region in a workspace of `bytes` (a multiple of 256 from the start).
inline size_t collapse_region_offset(size_t bytes, int64_t D) {
  return (bytes - collapse_region_bytes(D)) / 256 * 256;
}

// Both kernels' workspace regions fit: the split collapse's at the end, the mixes' before it.
inline bool workspace_fits(int64_t D, size_t workspace_bytes) {
  return workspace_bytes >= collapse_region_bytes(D) + 256;
}

struct Args {
  const float* H;  // [T, hc, D]
  const float* fn;
  const float* base;
  const float* scale;
  const float* pre_prev;  // [T, hc]
  const float* norm_w;    // [D] or null
  float* pre;
  float* post;
  float* comb;
  float* xn;  // [T, D]
  uint32_t* counters;
  double* dot_part;
  double* ss_part;
  int64_t T, D, flat, S, chunk;
  int hc, mix, iters;
  float hc_eps, norm_eps;
  // Folded expand (collapse kernel only): H is H_new = hc_expand(y, H_old, post_prev, comb_prev),
  // written by the collapse blocks (null y: H is an input).
  const float* y;
  const float* H_old;
  const float* post_prev;
  const float* comb_prev;
  float* H_new;
};

// The collapse kernel (hc_site_collapse.cu): a.H (read; a.y set: a.H_new == a.H written first),
// pre_prev, norm_w, xn, T, hc, D, norm_eps set. Decode rows (T <= kSplitMaxTokens) take the split
// grid and the workspace's collapse region. cudaErrorInvalidValue before launching when the
// grid or the workspace does not fit.
cudaError_t launch_collapse(Args a, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace dsv41::kernels::detail::site
