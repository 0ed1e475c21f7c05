// Index top-k (spec model-architecture.md §2.4), the CUDA twin of dsv41::select_topk
// (model/attention/indexer.cpp): per query row, the k best of n scores by (score descending,
// lower id first on exact ties), -inf picks dropped, the kept ids ascending, -1 padded.
//
// Radix select, exact by construction. Scores map to order-preserving 32-bit keys (±0 to the same
// key, since the reference compares them equal). Four 8-bit histogram passes from the top digit
// find τ = the key of rank take-1 = min(k, n)-1 and `need`, how many entries equal to τ belong to
// the top take (the lowest-indexed ones: the tie rule). A final pass in index order keeps key > τ,
// and key == τ while fewer than `need` earlier τ-entries were kept (block scan), drops -inf, and
// writes the kept ids ascending. One block per row, 5 reads of the row: ~n/64 µs-scale at the
// released n = 32768 and k = 512 (docs/kernels.md), where the previous O(n²) rank count was
// milliseconds.
#include <cmath>
#include <cstdint>

#include "dsv41k/attention.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ uint32_t order_key(float v) {
  if (v == 0.0f) v = 0.0f;  // -0 and +0 compare equal in the reference
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix over the block of `flag` (in thread order) and the block total.
__device__ __forceinline__ int block_exclusive_scan(int flag, int* warp_sums, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  const int in_warp = __popc(ballot & ((1u << lane) - 1u));
  __syncthreads();  // warp_sums free from the previous use
  if (lane == 0) warp_sums[warp] = __popc(ballot);
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += warp_sums[w];
    sum += warp_sums[w];
  }
  *total = sum;
  return before + in_warp;
}

__global__ void __launch_bounds__(kThreads)
    select_topk_kernel(const float* scores, int64_t n, int k, int32_t* out) {
  __shared__ int hist[256];
  __shared__ int warp_sums[kWarps];
  __shared__ uint32_t s_prefix;
  __shared__ int s_need;
  const float* s = scores + blockIdx.x * n;
  int32_t* o = out + blockIdx.x * static_cast<int64_t>(k);
  const int take = static_cast<int>(n < k ? n : k);
  // Radix select of the key of rank take-1 (descending order).
  uint32_t prefix = 0, mask = 0;
  int need = take;  // rank still to find inside the current prefix bucket
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < n; j += kThreads) {
      const uint32_t key = order_key(s[j]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xFFu], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int above = 0, d = 255;
      for (; d > 0; --d) {  // the digit whose bucket holds rank need-1 from the top
        if (above + hist[d] >= need) break;
        above += hist[d];
      }
      s_prefix = prefix | (static_cast<uint32_t>(d) << shift);
      s_need = need - above;
    }
    __syncthreads();
    prefix = s_prefix;
    need = s_need;
    mask |= 0xFFu << shift;
    __syncthreads();
  }
  const uint32_t tau = prefix;  // `need` entries equal to tau are in the top take
  int kept = 0, eq_before = 0;
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t j = base + threadIdx.x;
    const float v = j < n ? s[j] : -INFINITY;
    const uint32_t key = order_key(v);
    const int eq = (j < n && key == tau) ? 1 : 0;
    int eq_total = 0;
    const int eq_rank = eq_before + block_exclusive_scan(eq, warp_sums, &eq_total);
    const int keep = (j < n && v > -INFINITY && (key > tau || (eq && eq_rank < need))) ? 1 : 0;
    int keep_total = 0;
    const int at = kept + block_exclusive_scan(keep, warp_sums, &keep_total);
    if (keep) o[at] = static_cast<int32_t>(j);
    kept += keep_total;
    eq_before += eq_total;
  }
  for (int i = kept + threadIdx.x; i < k; i += kThreads) o[i] = -1;
}

}  // namespace

cudaError_t select_topk(const float* scores, int64_t T, int64_t n, int k, int32_t* out,
                        cudaStream_t stream) {
  if (T < 0 || T > INT32_MAX || n < 0 || n > INT32_MAX || k < 1 || out == nullptr ||
      (n > 0 && T > 0 && scores == nullptr))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  select_topk_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(scores, n, k, out);
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
