// moe_route_dispatch: the router (moe/route_warp.cuh), the permutation and the descriptor tables
// (moe/permute_block.cuh) of a decode or verify step in one block, phases separated by block
// barriers. At decode these were three launches of ~1 block each per layer, latency only.
#include <algorithm>
#include <cmath>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"
#include "moe/permute_block.cuh"
#include "moe/route_warp.cuh"

namespace dsv41::kernels {
namespace {

// describe_set needs a thread per local expert; 512 (not kMoeMaxExperts) keeps the register cap at
// 128 (at 1024 threads the router spilled). Layers with more local experts take the 3 launches.
constexpr int kThreads = kMoeDispatchMaxLocalExperts;
// Dynamic shared memory of the router warps (score and biased [E] floats, order [k] ints each),
// beside the permutation's ~12 KB of static shared memory under the default 48 KB.
constexpr int64_t kRouteSharedBytes = 32 * 1024;

__global__ void __launch_bounds__(kThreads)
    dispatch_kernel(const detail::RouteParams p, int64_t T, int route_warps, int expert_begin,
                    int n_local, int32_t* counts, int32_t* offsets, int32_t* slot_token,
                    float* slot_weight, int32_t* inv, const detail::TileSets sets, int n_sets,
                    int tile_rows, int64_t capacity) {
  // This thread's expert's weight / scale pointers of every set, before the wait: the tables are
  // written at load (DeviceMoe::upload), never by a kernel (common/launch.cuh), and the
  // descriptor phase then has no global round trip per set. Static indices only (unrolled).
  const uint8_t* wt[kMoeMaxTileSets];
  const uint8_t* st[kMoeMaxTileSets];
#pragma unroll
  for (int i = 0; i < kMoeMaxTileSets; ++i) {
    const bool mine = i < n_sets && static_cast<int>(threadIdx.x) < n_local;
    wt[i] = mine ? sets.set[i].w_table[threadIdx.x] : nullptr;
    st[i] = mine ? sets.set[i].scale_table[threadIdx.x] : nullptr;
  }
  detail::pdl_begin();
  extern __shared__ float route_sh[];  // [route_warps][2 E + k]
  __shared__ detail::PermuteShared psh;
  __shared__ detail::DescribeShared dsh;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Tokens in rounds of route_warps: every thread computes scores (one (token, expert) pair at a
  // time), then warp w selects the top-k of the round's token w. At one token the scores on one
  // warp were a chain of E / 32 = 12 fp64 exp + log1p evaluations per lane.
  for (int64_t t0 = 0; t0 < T; t0 += route_warps) {
    const int nt = static_cast<int>(min(static_cast<int64_t>(route_warps), T - t0));
    for (int i = threadIdx.x; i < nt * p.E; i += blockDim.x) {
      const int w = i / p.E, e = i - w * p.E;
      float* score = route_sh + static_cast<int64_t>(w) * (2 * p.E + p.k);
      detail::route_score(p, t0 + w, e, score, score + p.E);
    }
    __syncthreads();
    if (warp < nt) {
      const float* score = route_sh + static_cast<int64_t>(warp) * (2 * p.E + p.k);
      int* order =
          reinterpret_cast<int*>(route_sh + static_cast<int64_t>(warp) * (2 * p.E + p.k) + 2 * p.E);
      detail::route_select(p, t0 + warp, lane, score, score + p.E, order);
    }
    __syncthreads();  // the slots are refilled next round
  }
  // ids / weights (global, this block's writes) are complete after the last round's barrier.
  detail::permute_block(p.ids, p.weights, static_cast<int>(T * p.k), p.k, expert_begin, n_local,
                        counts, offsets, slot_token, slot_weight, inv, psh);
  // Bucket e is [cursor of e - 1, cursor of e) after the permutation (its cursors end where the
  // next bucket starts), so count and offset come from shared memory, not a global re-read.
  const int e = threadIdx.x;
  int count = 0, off = 0;
  if (e < n_local) {
    off = e > 0 ? psh.cnt[e - 1] : 0;
    count = psh.cnt[e] - off;
  }
  const detail::DescribeScan scan = detail::describe_scan(count, tile_rows, dsh);
#pragma unroll
  for (int i = 0; i < kMoeMaxTileSets; ++i)
    if (i < n_sets)
      detail::describe_write(sets.set[i], scan.tiles > 0 ? wt[i] : nullptr,
                             scan.tiles > 0 ? st[i] : nullptr, off, count, scan, tile_rows,
                             capacity);
}

}  // namespace

cudaError_t moe_route_dispatch(const MoeRouteArgs& r, int64_t T, int32_t* ids, float* weights,
                               int expert_begin, int expert_end, int32_t* counts, int32_t* offsets,
                               int32_t* slot_token, float* slot_weight, int32_t* inv,
                               const MoeTileSet* sets, int n_sets, int tile_rows, int64_t capacity,
                               cudaStream_t stream) {
  const int n_local = expert_end - expert_begin;
  detail::TileSets all;
  if (r.logits == nullptr || r.bias == nullptr || (r.image_flags && r.bias_vl == nullptr) ||
      r.E < 1 || r.E > kMoeMaxExperts || r.k < 1 || r.k > r.E || r.k > kMoeMaxTopK ||
      !std::isfinite(r.gate_temp) || !(r.gate_temp > 0.0f) || T < 1 || T > kMoeDispatchMaxTokens ||
      ids == nullptr || weights == nullptr || counts == nullptr || offsets == nullptr ||
      slot_token == nullptr || slot_weight == nullptr || inv == nullptr || expert_begin < 0 ||
      expert_end <= expert_begin || n_local > kMoeDispatchMaxLocalExperts ||
      !detail::pack_tile_sets(sets, n_sets, all) || tile_rows < 1 || capacity < 1)
    return cudaErrorInvalidValue;
  const int64_t per_warp = (2 * int64_t{r.E} + r.k) * 4;
  const int route_warps =
      static_cast<int>(std::min<int64_t>({T, kThreads / 32, kRouteSharedBytes / per_warp}));
  const detail::RouteParams p{r.logits, r.bias,      r.bias_vl,        r.image_flags,
                              ids,      weights,     nullptr,          r.E,
                              r.k,      r.gate_temp, r.norm_topk_prob, r.routed_scaling_factor};
  // Also a thread per score of a round (up to kThreads): with 32 local experts at one token the
  // block was one warp, and the scores 12 fp64 exp + log1p chains per lane (14 us per layer).
  const int score_threads =
      static_cast<int>(std::min<int64_t>(kThreads, int64_t{route_warps} * r.E + 31) / 32 * 32);
  const int threads = std::max({32 * route_warps, (n_local + 31) / 32 * 32, score_threads});
  return detail::launch_kernel(dispatch_kernel, 1, static_cast<unsigned>(threads),
                               static_cast<size_t>(route_warps * per_warp), stream, p, T,
                               route_warps, expert_begin, n_local, counts, offsets, slot_token,
                               slot_weight, inv, all, n_sets, tile_rows, capacity);
}

}  // namespace dsv41::kernels
