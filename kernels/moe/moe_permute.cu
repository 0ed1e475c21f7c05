// Token permutation of the routed experts (spec model-architecture.md §4, CPU reference
// model/moe.cpp moe_forward: for e in [expert_begin, expert_end), for t, for i: rows with
// ids[t, i] == e), the row gather, and the grouped-GEMV descriptors of the buckets.
//
// moe_permute is one block: (1) per-expert counts by shared-memory integer atomics (the sum does
// not depend on their order), (2) the exclusive prefix sum on one thread (n_local <= 1024 adds),
// (3) the slots in (t, i) order by one warp through shared-memory tiles (warp-match ranks, no
// ordering atomics), so each bucket is filled in token order.
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kPermuteThreads = kMoeMaxExperts;  // one thread per local expert
constexpr int kTile = 2048;                      // (t, i) entries staged per round

__global__ void __launch_bounds__(kPermuteThreads)
    permute_kernel(const int32_t* __restrict__ ids, const float* __restrict__ weights,
                   int n_entries, int k, int expert_begin, int n_local, int32_t* counts,
                   int32_t* offsets, int32_t* slot_token, float* slot_weight, int32_t* inv) {
  detail::pdl_begin();
  __shared__ int cnt[kMoeMaxExperts + 1];
  __shared__ int tile[kTile];
  for (int e = threadIdx.x; e < n_local; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int j = threadIdx.x; j < n_entries; j += blockDim.x) {
    const int e = ids[j] - expert_begin;
    if (e >= 0 && e < n_local)
      atomicAdd(&cnt[e], 1);
    else
      inv[j] = -1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int acc = 0;
    for (int e = 0; e < n_local; ++e) {
      const int c = cnt[e];
      counts[e] = c;
      offsets[e] = acc;
      cnt[e] = acc;  // becomes the write cursor of bucket e
      acc += c;
    }
    offsets[n_local] = acc;
  }
  __syncthreads();
  // (3) The slots in (t, i) order: warp 0 walks the staged entries 32 at a time; lanes holding
  // the same expert find each other with __match_any_sync, a lane's slot is the bucket cursor plus
  // its rank among them (lower lanes = earlier entries first), and the group's lowest lane moves
  // the cursor. (One thread per expert walking every entry cost 2.2 ms per layer at a 2048-token
  // chunk under ncu: 12,288 dependent shared reads on 32 threads.)
  const int lane = threadIdx.x & 31;
  const unsigned lower = (1u << lane) - 1u;
  for (int base = 0; base < n_entries; base += kTile) {
    const int n = min(kTile, n_entries - base);
    __syncthreads();  // the previous tile is consumed
    for (int j = threadIdx.x; j < n; j += blockDim.x) tile[j] = ids[base + j] - expert_begin;
    __syncthreads();
    if (threadIdx.x >= 32) continue;
    for (int j0 = 0; j0 < n; j0 += 32) {
      const int j = j0 + lane;
      const int e = j < n ? tile[j] : -1;
      const bool local = e >= 0 && e < n_local;
      const unsigned group = __match_any_sync(0xFFFFFFFFu, local ? e : -1 - lane);
      if (local) {
        const int cursor = cnt[e] + __popc(group & lower);
        const int entry = base + j;
        slot_token[cursor] = entry / k;
        if (slot_weight) slot_weight[cursor] = weights[entry];
        inv[entry] = cursor;
      }
      __syncwarp();
      if (local && (group & lower) == 0) cnt[e] += __popc(group);
      __syncwarp();
    }
  }
}

constexpr int64_t kGatherCols = 1024;

__global__ void gather_kernel(const float* __restrict__ x, const int32_t* __restrict__ slot_token,
                              const int32_t* __restrict__ n_slots, float* __restrict__ xs,
                              int64_t D) {
  detail::pdl_begin();
  const int64_t s = blockIdx.x;
  if (s >= *n_slots) return;
  const float* src = x + static_cast<int64_t>(slot_token[s]) * D;
  float* dst = xs + s * D;
  // blockIdx.y: a 1024-column slice (at decode 6 slots x 1 block left 20 serial copies per thread)
  const int64_t end = min(D, (static_cast<int64_t>(blockIdx.y) + 1) * kGatherCols);
  for (int64_t d = blockIdx.y * kGatherCols + threadIdx.x; d < end; d += blockDim.x)
    dst[d] = src[d];
}

// Sets of descriptor tables written by one launch (block b = set b).
struct TileSets {
  MoeTileSet set[kMoeMaxTileSets];
};

// Thread e owns local expert e: its tile count ceil(counts[e] / tile_rows), an exclusive block
// scan of those counts gives its first descriptor, so the list is in (expert, r0) order exactly
// as the serial loop of the reference, without one thread walking all n_local experts (a single
// thread took 7.5 us per table at 32 experts under ncu; 384 would take ~12x that).
constexpr int kDescThreads = kMoeMaxExperts;

__global__ void __launch_bounds__(kDescThreads)
    descriptors_kernel(const int32_t* __restrict__ counts, const int32_t* __restrict__ offsets,
                       int n_local, TileSets sets, int tile_rows, int64_t capacity) {
  detail::pdl_begin();
  __shared__ int64_t warp_sum[kDescThreads / 32];
  __shared__ int64_t total;
  const MoeTileSet& set = sets.set[blockIdx.x];
  const int e = threadIdx.x, lane = e & 31, warp = e >> 5;
  const int c = e < n_local ? counts[e] : 0;
  const int64_t tiles = c > 0 ? (c + tile_rows - 1) / tile_rows : 0;
  int64_t incl = tiles;  // inclusive scan within the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t v = __shfl_up_sync(0xFFFFFFFFu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  if (e == 0) {
    int64_t acc = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
      const int64_t v = warp_sum[w];
      warp_sum[w] = acc;
      acc += v;
    }
    total = acc;
  }
  __syncthreads();
  const int64_t first = warp_sum[warp] + incl - tiles;
  if (tiles > 0) {
    const uint8_t* w = set.w_table[e];
    const uint8_t* sc = set.scale_table[e];
    const int32_t off = offsets[e];
    for (int64_t j = 0; j < tiles && first + j < capacity; ++j) {
      MoeGemvDesc d;
      d.w = w;
      d.scale = sc;
      d.x_row = off + static_cast<int32_t>(j) * tile_rows;
      d.y_row = d.x_row + set.y_row_shift;
      d.rows = w ? min(tile_rows, c - static_cast<int32_t>(j) * tile_rows) : 0;
      set.desc[first + j] = d;
    }
  }
  for (int64_t i = total + e; i < capacity; i += blockDim.x)
    set.desc[i] = MoeGemvDesc{nullptr, nullptr, 0, 0, 0};
}

}  // namespace

cudaError_t moe_permute(const int32_t* ids, const float* weights, int64_t T, int k,
                        int expert_begin, int expert_end, int32_t* counts, int32_t* offsets,
                        int32_t* slot_token, float* slot_weight, int32_t* inv,
                        cudaStream_t stream) {
  if (ids == nullptr || counts == nullptr || offsets == nullptr || slot_token == nullptr ||
      inv == nullptr || (weights == nullptr) != (slot_weight == nullptr) || T < 0 || k < 1 ||
      k > kMoeMaxTopK || expert_begin < 0 || expert_end <= expert_begin ||
      expert_end - expert_begin > kMoeMaxExperts || T * k > 0x7FFFFFFF)
    return cudaErrorInvalidValue;
  return detail::launch_kernel(permute_kernel, 1, kPermuteThreads, 0, stream, ids, weights,
                               static_cast<int>(T * k), k, expert_begin, expert_end - expert_begin,
                               counts, offsets, slot_token, slot_weight, inv);
}

cudaError_t moe_gather(const float* x, const int32_t* slot_token, const int32_t* n_slots, float* xs,
                       int64_t capacity, int64_t D, cudaStream_t stream) {
  if (x == nullptr || slot_token == nullptr || n_slots == nullptr || xs == nullptr ||
      capacity < 0 || capacity > 0x7FFFFFFF || D < 1 || static_cast<const void*>(x) == xs)
    return cudaErrorInvalidValue;
  if (capacity == 0) return cudaSuccess;
  const int64_t col_blocks = (D + kGatherCols - 1) / kGatherCols;
  if (col_blocks > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(capacity), static_cast<unsigned>(col_blocks));
  return detail::launch_kernel(gather_kernel, grid, 256, 0, stream, x, slot_token, n_slots, xs, D);
}

int64_t moe_tile_capacity(int64_t T, int k, int n_local, int tile_rows) {
  if (T < 0 || k < 1 || n_local < 1 || tile_rows < 1) return 0;
  const int64_t slots = T * k;
  return std::max<int64_t>(1, std::min<int64_t>(n_local, slots) + slots / tile_rows);
}

int64_t moe_descriptor_capacity(int64_t T, int k, int n_local) {
  return moe_tile_capacity(T, k, n_local, kMoeGemvMaxRows);
}

cudaError_t moe_expert_tile_sets(const int32_t* counts, const int32_t* offsets, int n_local,
                                 const MoeTileSet* sets, int n_sets, int tile_rows,
                                 int64_t capacity, cudaStream_t stream) {
  if (counts == nullptr || offsets == nullptr || sets == nullptr || n_sets < 1 ||
      n_sets > kMoeMaxTileSets || n_local < 1 || n_local > kMoeMaxExperts || capacity < 1 ||
      tile_rows < 1)
    return cudaErrorInvalidValue;
  TileSets all{};
  for (int i = 0; i < n_sets; ++i) {
    const MoeTileSet& t = sets[i];
    if (t.w_table == nullptr || t.scale_table == nullptr || t.desc == nullptr || t.y_row_shift < 0)
      return cudaErrorInvalidValue;
    all.set[i] = t;
  }
  const unsigned threads = static_cast<unsigned>((n_local + 31) / 32 * 32);
  return detail::launch_kernel(descriptors_kernel, static_cast<unsigned>(n_sets), threads, 0,
                               stream, counts, offsets, n_local, all, tile_rows, capacity);
}

cudaError_t moe_expert_tiles(const int32_t* counts, const int32_t* offsets, int n_local,
                             const uint8_t* const* w_table, const uint8_t* const* scale_table,
                             int32_t y_row_shift, int tile_rows, MoeGemvDesc* desc,
                             int64_t capacity, cudaStream_t stream) {
  const MoeTileSet set{w_table, scale_table, y_row_shift, desc};
  return moe_expert_tile_sets(counts, offsets, n_local, &set, 1, tile_rows, capacity, stream);
}

cudaError_t moe_expert_descriptors(const int32_t* counts, const int32_t* offsets, int n_local,
                                   const uint8_t* const* w_table, const uint8_t* const* scale_table,
                                   int32_t y_row_shift, MoeGemvDesc* desc, int64_t capacity,
                                   cudaStream_t stream) {
  return moe_expert_tiles(counts, offsets, n_local, w_table, scale_table, y_row_shift,
                          kMoeGemvMaxRows, desc, capacity, stream);
}

}  // namespace dsv41::kernels
