// Kernel launches with programmatic dependent launch (PDL, sm_90+; GB10's sm_121 has it too).
//
// A decode step is ~1,200 dependent launches (docs/perf.md), most of them a few µs long, so the
// gap between one kernel's last block and the next kernel's first (launch, block scheduling,
// the first loads) is a large share of the step. Launched with programmatic stream serialisation,
// the next grid is scheduled as soon as every block of the current one has called
// pdl_launch_dependents(); it then runs its independent prologue (weight loads) and blocks in
// pdl_wait() until the previous grid has completed and its writes are visible.
//
// Rules every kernel launched by launch_kernel() keeps (docs/kernels.md "Dependent launch"):
//   - pdl_wait() comes before the first read of anything an earlier kernel wrote and before the
//     first global write, and every block executes it (a block that returned before it could let
//     the grid complete while its predecessor still runs, and the kernel after would then not be
//     ordered after that predecessor);
//   - only data no kernel writes (weights, scales) is touched before it.
// Both instructions are no-ops when the grid was launched without the attribute.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "common/launch.cuh"
#include "dsv41k/launchers.hpp"

namespace dsv41::kernels::detail {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The usual kernel prologue: wait for the previous grid, then let the next one be scheduled.
// Triggering after the wait (not before) keeps at most two grids in flight.
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_launch_dependents();
}

// Asks L2 for the 128-byte line holding p (weights read right after pdl_wait()).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialisation when
// programmatic_launch() is on and, for cluster_x > 0, thread-block clusters of cluster_x blocks
// along x. Returns the launch status (also left as the thread's last error).
template <class... Params, class... Args>
cudaError_t launch_kernel_attrs(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                cudaStream_t stream, unsigned cluster_x, Args&&... args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = programmatic_launch() ? 1 : 0;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster_x;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = cluster_x > 0 ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialisation when
// programmatic_launch() is on.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, Args&&... args) {
  return launch_kernel_attrs(kernel, grid, block, smem, stream, 0u, std::forward<Args>(args)...);
}

// launch_kernel with thread-block clusters of cluster_x blocks along x (gridDim.x % cluster_x ==
// 0, 1 <= cluster_x <= 8: the portable size; sm_90+).
template <class... Params, class... Args>
cudaError_t launch_kernel_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                  cudaStream_t stream, unsigned cluster_x, Args&&... args) {
  return launch_kernel_attrs(kernel, grid, block, smem, stream, cluster_x,
                             std::forward<Args>(args)...);
}

}  // namespace dsv41::kernels::detail
