// The token permutation and the grouped-GEMV descriptors of one MoE layer as block-level device
// functions (spec model-architecture.md §4, CPU reference model/moe.cpp moe_forward: for e in
// [expert_begin, expert_end), for t, for i: rows with ids[t, i] == e). Used by moe_permute /
// moe_expert_tile_sets (one launch each) and moe_route_dispatch (both after the router in one
// block); the same code, so the same bytes.
#pragma once

#include <cstdint>

#include "dsv41k/moe.hpp"

namespace dsv41::kernels::detail {

inline constexpr int kPermuteTile = 2048;  // (t, i) entries staged per round

// Shared memory of permute_block.
struct PermuteShared {
  int cnt[kMoeMaxExperts + 1];
  int tile[kPermuteTile];
  int warp_sum[32];
  int total;
};

// (1) per-expert counts by shared-memory integer atomics (the sum does not depend on their
// order), (2) the exclusive prefix sum as a block scan over per-thread runs of experts (one thread
// walking 384 experts was a chain of 384 dependent shared-memory round trips), (3) the slots in
// (t, i) order by warp 0 through shared-memory tiles (warp-match ranks, no ordering atomics), so
// each bucket is filled in token order. Any block size that is a multiple of 32; ends with the
// block's writes visible to the block (__syncthreads).
__device__ __forceinline__ void permute_block(const int32_t* ids, const float* weights,
                                              int n_entries, int k, int expert_begin, int n_local,
                                              int32_t* counts, int32_t* offsets,
                                              int32_t* slot_token, float* slot_weight, int32_t* inv,
                                              PermuteShared& sh) {
  for (int e = threadIdx.x; e < n_local; e += blockDim.x) sh.cnt[e] = 0;
  __syncthreads();
  for (int j = threadIdx.x; j < n_entries; j += blockDim.x) {
    const int e = ids[j] - expert_begin;
    if (e >= 0 && e < n_local)
      atomicAdd(&sh.cnt[e], 1);
    else
      inv[j] = -1;
  }
  __syncthreads();
  {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int per = (n_local + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
    const int e0 = min(n_local, static_cast<int>(threadIdx.x) * per), e1 = min(n_local, e0 + per);
    int run = 0;
    for (int e = e0; e < e1; ++e) run += sh.cnt[e];
    int incl = run;  // inclusive scan of the runs within the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xFFFFFFFFu, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) sh.warp_sum[warp] = incl;
    __syncthreads();
    if (warp == 0) {  // <= 32 warps: one more warp scan turns the warp sums exclusive
      const int nw = static_cast<int>(blockDim.x) / 32;
      const int w = lane < nw ? sh.warp_sum[lane] : 0;
      int wi = w;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xFFFFFFFFu, wi, o);
        if (lane >= o) wi += v;
      }
      if (lane < nw) sh.warp_sum[lane] = wi - w;
      if (lane == 31) sh.total = wi;
    }
    __syncthreads();
    int acc = sh.warp_sum[warp] + incl - run;
    for (int e = e0; e < e1; ++e) {
      const int c = sh.cnt[e];
      counts[e] = c;
      offsets[e] = acc;
      sh.cnt[e] = acc;  // becomes the write cursor of bucket e
      acc += c;
    }
    if (threadIdx.x == 0) offsets[n_local] = sh.total;
  }
  __syncthreads();
  // (3) Warp 0 walks the staged entries 32 at a time; lanes holding the same expert find each
  // other with __match_any_sync, a lane's slot is the bucket cursor plus its rank among them
  // (lower lanes = earlier entries first), and the group's lowest lane moves the cursor. (One
  // thread per expert walking every entry cost 2.2 ms per layer at a 2048-token chunk under ncu:
  // 12,288 dependent shared reads on 32 threads.)
  const int lane = threadIdx.x & 31;
  const unsigned lower = (1u << lane) - 1u;
  for (int base = 0; base < n_entries; base += kPermuteTile) {
    const int n = min(kPermuteTile, n_entries - base);
    __syncthreads();  // the previous tile is consumed
    for (int j = threadIdx.x; j < n; j += blockDim.x) sh.tile[j] = ids[base + j] - expert_begin;
    __syncthreads();
    if (threadIdx.x < 32) {
      for (int j0 = 0; j0 < n; j0 += 32) {
        const int j = j0 + lane;
        const int e = j < n ? sh.tile[j] : -1;
        const bool local = e >= 0 && e < n_local;
        const unsigned group = __match_any_sync(0xFFFFFFFFu, local ? e : -1 - lane);
        if (local) {
          const int cursor = sh.cnt[e] + __popc(group & lower);
          const int entry = base + j;
          slot_token[cursor] = entry / k;
          if (slot_weight) slot_weight[cursor] = weights[entry];
          inv[entry] = cursor;
        }
        __syncwarp();
        if (local && (group & lower) == 0) sh.cnt[e] += __popc(group);
        __syncwarp();
      }
    }
  }
  __syncthreads();
}

// Shared memory of describe_set.
struct DescribeShared {
  int64_t warp_sum[kMoeMaxExperts / 32];
  int64_t total;
};

// The descriptor tables of a permutation: thread e owns local expert e (blockDim.x >= n_local, a
// multiple of 32): its tile count ceil(count_e / tile_rows), an exclusive block scan of those
// counts gives its first descriptor, so each list is in (expert, r0) order exactly as the serial
// loop of the reference, without one thread walking all n_local experts (a single thread took
// 7.5 us per table at 32 experts under ncu; 384 would take ~12x that). The scan depends only on
// the counts and tile_rows, so the sets of one permutation share it.
struct DescribeScan {
  int64_t tiles = 0, first = 0, total = 0;
};

// The scan for this thread's expert with `count` rows (0 past n_local). Two barriers.
__device__ __forceinline__ DescribeScan describe_scan(int count, int tile_rows,
                                                      DescribeShared& sh) {
  const int e = threadIdx.x, lane = e & 31, warp = e >> 5;
  DescribeScan r;
  r.tiles = count > 0 ? (count + tile_rows - 1) / tile_rows : 0;
  int64_t incl = r.tiles;  // inclusive scan within the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t v = __shfl_up_sync(0xFFFFFFFFu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) sh.warp_sum[warp] = incl;
  __syncthreads();
  if (e == 0) {
    int64_t acc = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
      const int64_t v = sh.warp_sum[w];
      sh.warp_sum[w] = acc;
      acc += v;
    }
    sh.total = acc;
  }
  __syncthreads();
  r.first = sh.warp_sum[warp] + incl - r.tiles;
  r.total = sh.total;
  return r;
}

// One set's table: this thread's expert's descriptors (w, sc: its w_table / scale_table entries;
// off, count: its bucket), then the empty entries [total, capacity). No barrier.
__device__ __forceinline__ void describe_write(const MoeTileSet& set, const uint8_t* w,
                                               const uint8_t* sc, int32_t off, int count,
                                               const DescribeScan& s, int tile_rows,
                                               int64_t capacity) {
  for (int64_t j = 0; j < s.tiles && s.first + j < capacity; ++j) {
    MoeGemvDesc d;
    d.w = w;
    d.scale = sc;
    d.x_row = off + static_cast<int32_t>(j) * tile_rows;
    d.y_row = d.x_row + set.y_row_shift;
    d.rows = w ? min(tile_rows, count - static_cast<int32_t>(j) * tile_rows) : 0;
    set.desc[s.first + j] = d;
  }
  for (int64_t i = s.total + threadIdx.x; i < capacity; i += blockDim.x)
    set.desc[i] = MoeGemvDesc{nullptr, nullptr, 0, 0, 0};
}

// One set from counts / offsets in global memory (moe_expert_tile_sets: a block per set). Ends
// with a barrier (the shared scratch may be reused).
__device__ __forceinline__ void describe_set(const int32_t* counts, const int32_t* offsets,
                                             int n_local, const MoeTileSet& set, int tile_rows,
                                             int64_t capacity, DescribeShared& sh) {
  const int e = threadIdx.x;
  const int c = e < n_local ? counts[e] : 0;
  const DescribeScan s = describe_scan(c, tile_rows, sh);
  if (s.tiles > 0)
    describe_write(set, set.w_table[e], set.scale_table[e], offsets[e], c, s, tile_rows, capacity);
  else
    describe_write(set, nullptr, nullptr, 0, 0, s, tile_rows, capacity);
  __syncthreads();
}

// Descriptor-table sets passed by value to a kernel (moe_expert_tile_sets: block b = set b;
// moe_route_dispatch: all of them in turn).
struct TileSets {
  MoeTileSet set[kMoeMaxTileSets];
};

// Copies sets[0, n) into out; false for n outside [1, kMoeMaxTileSets] or a set with a null
// table or a negative y_row_shift (the launchers then return cudaErrorInvalidValue).
inline bool pack_tile_sets(const MoeTileSet* sets, int n, TileSets& out) {
  if (sets == nullptr || n < 1 || n > kMoeMaxTileSets) return false;
  out = TileSets{};
  for (int i = 0; i < n; ++i) {
    const MoeTileSet& t = sets[i];
    if (t.w_table == nullptr || t.scale_table == nullptr || t.desc == nullptr || t.y_row_shift < 0)
      return false;
    out.set[i] = t;
  }
  return true;
}

}  // namespace dsv41::kernels::detail
