// sample_tokens: the Sampler chain (docs/sampling.md steps 1-8; CPU spec sampler.cpp,
// penalties.cpp, truncation.cpp) on up to 16 rows of device logits, in four launches:
//   prepare  (block per row)      mask, NaN/inf checks, logit_bias + penalties, max / greedy
//                                 argmax, temperature, min_p, top_k (radix select by count)
//   weights  (blocks per row)     w = exp(double(logit)) for every survivor: the only fp64
//                                 transcendental per token, spread over many SMs because GB10's
//                                 fp64 rate is 1/64 of fp32 (~0.7 ms for 129,280 exps on one SM)
//   top_p    (block per row)      radix select of the cut key on exact fixed-point masses, then
//                                 the key's ties in id order
//   draw     (block per row)      inverse CDF in id order with the host's uniform; the only
//                                 writer of `out` (greedy / error rows: prepare's row-state result)
// Workspace per row: work [vocab] fp32 (the chain's logits), w [vocab] fp64, a row state.
// Steps 1-7 reproduce the CPU's fp32 operations exactly (unfused IEEE ops, same comparisons), so
// the surviving set is the CPU's; only the fp64 sums of top_p and of the draw run in another
// order (see sample_block.cuh and the header).
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

#include "common/launch.cuh"
#include "dsv41k/sampling.hpp"
#include "sampling/sample_block.cuh"

namespace dsv41::kernels {
namespace {

using sampling::u128;

constexpr int kThreads = 1024;  // one block per row: 127 tokens per thread at 129,280
constexpr int kWeightThreads = 256;
constexpr int kWeightPerBlock = 4096;  // 32 blocks per row at 129,280: ~500 blocks for 16 rows

// prepare's outcome for a row. prepare never writes `out`: draw_kernel writes every row's
// SampleResult exactly once (from here when inactive, else the drawn token), so a result slot
// cannot keep a placeholder or be written by two kernels.
struct RowState {
  int32_t active;       // 1: non-greedy row without error, weights/top_p/draw run
  SampleResult result;  // the row's final result when active == 0
  int32_t pad[59];
};

size_t align256(size_t b) { return (b + 255) & ~size_t{255}; }

struct RowView {
  float* work;
  double* w;
  RowState* state;
};

__device__ __forceinline__ RowView row_view(void* ws, int64_t vocab, int64_t r) {
  const size_t wb = (static_cast<size_t>(vocab) * 4 + 255) & ~size_t{255};
  const size_t db = (static_cast<size_t>(vocab) * 8 + 255) & ~size_t{255};
  char* base = static_cast<char*>(ws) + static_cast<size_t>(r) * (wb + db + sizeof(RowState));
  return {reinterpret_cast<float*>(base), reinterpret_cast<double*>(base + wb),
          reinterpret_cast<RowState*>(base + wb + db)};
}

// Ends prepare for a greedy or error row: the result goes to the row state; draw_kernel copies it
// to `out`. Every thread of the block must take the same path (callers branch on block-uniform
// values read after a __syncthreads).
__device__ void finish_row(RowState* st, int32_t token, int32_t status, int32_t count,
                           int32_t first) {
  if (threadIdx.x == 0) {
    st->result = SampleResult{token, status, count, first};
    st->active = 0;
  }
}

__global__ void __launch_bounds__(kThreads)
    prepare_kernel(const float* logits, int64_t vocab, const SampleRowParams* params,
                   const SampleAdjust* adjust, const int32_t* adjust_offsets,
                   const uint32_t* allowed, void* ws) {
  detail::pdl_begin();
  __shared__ int s_nan, s_pinf, s_ninf, s_first_nan, s_first_pinf;
  __shared__ unsigned long long s_best;
  __shared__ int hist[256];
  __shared__ uint32_t s_prefix;
  __shared__ int64_t s_need;
  const int64_t r = blockIdx.x;
  const int n = static_cast<int>(vocab);
  const RowView row = row_view(ws, vocab, r);
  const SampleRowParams p = params[r];
  const float* lg = logits + r * vocab;
  const int64_t words = (vocab + 31) / 32;
  if (threadIdx.x == 0) {
    s_nan = s_pinf = s_ninf = 0;
    s_first_nan = s_first_pinf = INT_MAX;
    s_best = 0;
  }
  __syncthreads();
  // Mask (ToolCallConstraint::mask) then check_logits' counts.
  int nan = 0, pinf = 0, ninf = 0, first_nan = INT_MAX, first_pinf = INT_MAX;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float l = lg[i];
    if (allowed != nullptr) {
      const bool ok = (allowed[r * words + i / 32] >> (i % 32)) & 1u;
      l = ok ? (l == -INFINITY ? 0.0f : l) : -INFINITY;
    }
    if (isnan(l)) {
      if (nan++ == 0) first_nan = i;
    } else if (l == INFINITY) {
      if (pinf++ == 0) first_pinf = i;
    } else if (l == -INFINITY) {
      ++ninf;
    }
    row.work[i] = l;
  }
  if (nan > 0) {
    atomicAdd(&s_nan, nan);
    atomicMin(&s_first_nan, first_nan);
  }
  if (pinf > 0) {
    atomicAdd(&s_pinf, pinf);
    atomicMin(&s_first_pinf, first_pinf);
  }
  if (ninf > 0) atomicAdd(&s_ninf, ninf);
  __syncthreads();
  if (s_nan > 0) return finish_row(row.state, -1, kSampleNan, s_nan, s_first_nan);
  if (s_pinf > 0) return finish_row(row.state, -1, kSamplePosInf, s_pinf, s_first_pinf);
  if (s_ninf == n) return finish_row(row.state, -1, kSampleAllNegInf, n, -1);
  // Steps 1-2 on the listed tokens: the CPU's fp32 operations in its order, unfused.
  if (adjust_offsets != nullptr) {
    for (int j = adjust_offsets[r] + threadIdx.x; j < adjust_offsets[r + 1]; j += kThreads) {
      const SampleAdjust a = adjust[j];
      float l = row.work[a.id];
      if (a.flags & kAdjustBias) l = __fadd_rn(l, a.bias);
      if (a.flags & kAdjustRepeat)
        l = l > 0.0f ? __fdiv_rn(l, a.repetition) : __fmul_rn(l, a.repetition);
      if (a.flags & kAdjustPenalty) l = __fsub_rn(__fsub_rn(l, a.frequency_term), a.presence);
      row.work[a.id] = l;
    }
  }
  __syncthreads();  // the adjusted values are visible to the whole block
  // Max and the lowest id holding it: one 64-bit key per token, (order_key(value), ~id), so the
  // largest key is the largest value and, among equal values, the lowest id (argmax_lowest_id).
  unsigned long long best = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const unsigned long long key =
        (static_cast<unsigned long long>(sampling::order_key(row.work[i])) << 32) |
        static_cast<uint32_t>(~static_cast<uint32_t>(i));
    best = key > best ? key : best;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(sampling::kFullWarp, best, o);
    best = other > best ? other : best;
  }
  if (threadIdx.x % 32 == 0) atomicMax(&s_best, best);
  __syncthreads();
  const int bi = static_cast<int>(~static_cast<uint32_t>(s_best & 0xFFFFFFFFull));
  const float m = row.work[bi];
  if (m == -INFINITY) return finish_row(row.state, -1, kSampleNothingLeft, 0, -1);
  if (m == INFINITY) return finish_row(row.state, -1, kSampleOverflow, 1, bi);
  if (p.greedy) return finish_row(row.state, bi, kSampleOk, 0, -1);
  // Temperature as (logit - max) / T, then min_p: drop exp(double(v) - 0) < min_p (the max is
  // now exactly 0). The fp64 exp is needed only within 1e-9 of log(min_p); outside that band
  // the comparison's outcome cannot depend on exp's last-ulp error (~2e-16 relative).
  const double min_p = p.min_p;
  const double log_min_p = p.min_p > 0.0f ? log(min_p) : -INFINITY;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float v = row.work[i];
    if (v == -INFINITY) continue;
    v = __fdiv_rn(__fsub_rn(v, m), p.temperature);
    if (p.min_p > 0.0f && v != -INFINITY) {
      const double x = v;
      const bool drop = x < log_min_p - 1e-9 ? true : x > log_min_p + 1e-9 ? false : exp(x) < min_p;
      if (drop) v = -INFINITY;
    }
    row.work[i] = v;
  }
  __syncthreads();
  // top_k: keep v >= the k-th largest of all vocab values (-inf included, like nth_element on
  // the whole vector: fewer than k finite values make the k-th -inf and drop nothing).
  if (p.top_k > 0 && p.top_k < vocab) {
    const float* work = row.work;
    radix::threshold_keys<kThreads>([work](int64_t j) { return sampling::order_key(work[j]); },
                                    vocab, p.top_k, hist, &s_prefix, &s_need);
    const uint32_t kth = s_prefix;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      if (sampling::order_key(row.work[i]) < kth) row.work[i] = -INFINITY;
    }
  }
  if (threadIdx.x == 0) {
    row.state->result = SampleResult{-1, kSampleNoCandidate, 0, -1};  // draw_kernel replaces it
    row.state->active = 1;
  }
}

__global__ void __launch_bounds__(kWeightThreads) weights_kernel(int64_t vocab, void* ws) {
  detail::pdl_begin();
  const RowView row = row_view(ws, vocab, blockIdx.y);
  if (!row.state->active) return;
  const int64_t end = min(vocab, static_cast<int64_t>(blockIdx.x + 1) * kWeightPerBlock);
  for (int64_t i = blockIdx.x * int64_t{kWeightPerBlock} + threadIdx.x; i < end;
       i += kWeightThreads) {
    const float v = row.work[i];
    row.w[i] = v == -INFINITY ? 0.0 : exp(static_cast<double>(v));  // exp_weights, max = 0
  }
}

// apply_top_p: the kept set is the shortest prefix of (probability desc, id asc) whose
// remainder is <= 1 - top_p. Radix passes over the keys find the cut key tau from exact
// fixed-point masses (no sort, any number of survivors); tau's ties are then walked in id order.
__global__ void __launch_bounds__(kThreads)
    top_p_kernel(int64_t vocab, const SampleRowParams* params, void* ws) {
  detail::pdl_begin();
  __shared__ unsigned long long bins[256 * 3];
  __shared__ u128 s_part[kThreads];
  __shared__ u128 s_warp[kThreads / 32];
  __shared__ u128 s_above, s_total;
  __shared__ uint32_t s_prefix;
  __shared__ int s_cut;
  const int64_t r = blockIdx.x;
  const RowView row = row_view(ws, vocab, r);
  const float top_p = params[r].top_p;
  if (!row.state->active || !(top_p < 1.0f)) return;
  const double drop_mass = 1.0 - static_cast<double>(top_p);
  const int n = static_cast<int>(vocab);
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256 * 3; i += kThreads) bins[i] = 0;
    __syncthreads();
    for (int base = 0; base < n; base += kThreads) {
      const int j = base + threadIdx.x;
      const float v = j < n ? row.work[j] : -INFINITY;
      const uint32_t key = sampling::order_key(v);
      const bool in = v != -INFINITY && (key & mask) == prefix;
      sampling::add_mass(bins, static_cast<int>((key >> shift) & 0xFFu),
                         in ? sampling::to_fixed(row.w[j]) : 0, in);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (shift == 24) {
        u128 t = 0;
        for (int d = 0; d < 256; ++d) t += sampling::bin_mass(bins, d);
        s_total = t;
        s_above = 0;
      }
      // The highest digit whose bucket completes a prefix that passes the stop test: the
      // test holds from the cut on, and not for the mass above the bucket.
      u128 above = s_above;
      int d = 255;
      for (; d > 0; --d) {
        const u128 cum = above + sampling::bin_mass(bins, d);
        if (sampling::tail_dropped(s_total, cum, drop_mass)) break;
        above = cum;
      }
      s_above = above;
      s_prefix = prefix | (static_cast<uint32_t>(d) << shift);
    }
    __syncthreads();
    prefix = s_prefix;
    mask |= 0xFFu << shift;
  }
  const uint32_t tau = prefix;
  const u128 total = s_total;
  // tau's ties in id order: per-thread contiguous id ranges, an exclusive scan of their masses,
  // then the thread whose range holds the cut walks it.
  const int chunk = (n + kThreads - 1) / kThreads;
  const int lo = min(n, static_cast<int>(threadIdx.x) * chunk), hi = min(n, lo + chunk);
  u128 local = 0;
  for (int j = lo; j < hi; ++j) {
    const float v = row.work[j];
    if (v != -INFINITY && sampling::order_key(v) == tau) local += sampling::to_fixed(row.w[j]);
  }
  s_part[threadIdx.x] = local;
  if (threadIdx.x == 0) s_cut = INT_MAX;
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    u128 run = 0;
    for (int i = 0; i < 32; ++i) {
      const u128 x = s_part[threadIdx.x + i];
      s_part[threadIdx.x + i] = run;
      run += x;
    }
    s_warp[warp] = run;
  }
  __syncthreads();
  u128 cum = s_above + s_part[threadIdx.x];
  for (int w = 0; w < warp; ++w) cum += s_warp[w];
  if (local > 0) {
    for (int j = lo; j < hi; ++j) {
      const float v = row.work[j];
      if (v == -INFINITY || sampling::order_key(v) != tau) continue;
      cum += sampling::to_fixed(row.w[j]);
      if (sampling::tail_dropped(total, cum, drop_mass)) {
        atomicMin(&s_cut, j);
        break;
      }
    }
  }
  __syncthreads();
  const int cut = s_cut;  // always found: the whole bucket passed the test above
  for (int j = threadIdx.x; j < n; j += kThreads) {
    const float v = row.work[j];
    if (v == -INFINITY) continue;
    const uint32_t key = sampling::order_key(v);
    if (key < tau || (key == tau && j > cut)) row.w[j] = 0.0;
  }
}

// The only writer of out[r], for every row: prepare's result for a greedy or error row, else the
// inverse CDF of Sampler::sample: the first id whose cumulative weight (id order) exceeds
// u·total; past the end (rounding), the last id with weight. An active row always has a token of
// weight 1 (the max), so "no token with weight" is a fault of the kernels and is reported as
// kSampleNoCandidate, never as status ok with token -1.
__global__ void __launch_bounds__(kThreads)
    draw_kernel(int64_t vocab, const SampleRowParams* params, SampleResult* out, void* ws) {
  detail::pdl_begin();
  __shared__ double s_warp[kThreads / 32];
  __shared__ int s_found, s_last;
  const int64_t r = blockIdx.x;
  const RowView row = row_view(ws, vocab, r);
  if (!row.state->active) {  // block-uniform: every thread reads the same word
    if (threadIdx.x == 0) out[r] = row.state->result;
    return;
  }
  const int n = static_cast<int>(vocab);
  const int chunk = (n + kThreads - 1) / kThreads;
  const int lo = min(n, static_cast<int>(threadIdx.x) * chunk), hi = min(n, lo + chunk);
  double local = 0.0;
  int last = -1;
  for (int j = lo; j < hi; ++j) {
    const double x = row.w[j];
    if (x != 0.0) local += x, last = j;
  }
  if (threadIdx.x == 0) s_found = INT_MAX, s_last = -1;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double incl = local;
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(sampling::kFullWarp, incl, o);
    if (lane >= o) incl += y;
  }
  double excl = __shfl_up_sync(sampling::kFullWarp, incl, 1);
  if (lane == 0) excl = 0.0;
  if (lane == 31) s_warp[warp] = incl;
  __syncthreads();
  double base = 0.0, total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w == warp) base = total + excl;
    total += s_warp[w];
  }
  const double target = params[r].uniform * total;
  // Only the range(s) around target walk; 1e-12 of slack covers the scan's rounding.
  const double slack = 1e-12 * total;
  if (local > 0.0 && target >= base - slack && target < base + local + slack) {
    double cum = base;
    for (int j = lo; j < hi; ++j) {
      const double x = row.w[j];
      if (x == 0.0) continue;
      cum += x;
      if (target < cum) {
        atomicMin(&s_found, j);
        break;
      }
    }
  }
  if (last >= 0) atomicMax(&s_last, last);
  __syncthreads();
  if (threadIdx.x == 0) {
    const int token = s_found != INT_MAX ? s_found : s_last;
    out[r] = token >= 0 ? SampleResult{token, kSampleOk, 0, -1}
                        : SampleResult{-1, kSampleNoCandidate, 0, -1};
  }
}

}  // namespace

size_t sample_tokens_workspace_bytes(int64_t rows, int64_t vocab) {
  if (rows < 0 || rows > kSampleMaxRows || vocab < 1 || vocab > INT32_MAX) return 0;
  const size_t v = static_cast<size_t>(vocab);
  return static_cast<size_t>(rows) * (align256(v * 4) + align256(v * 8) + sizeof(RowState));
}

cudaError_t sample_tokens(const float* logits, int64_t rows, int64_t vocab,
                          const SampleRowParams* params, const SampleAdjust* adjust,
                          const int32_t* adjust_offsets, const uint32_t* allowed, SampleResult* out,
                          void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  static_assert(sizeof(RowState) == 256, "row state keeps the 256-byte alignment");
  if (rows < 0 || rows > kSampleMaxRows || vocab < 1 || vocab > INT32_MAX)
    return cudaErrorInvalidValue;
  if ((adjust == nullptr) != (adjust_offsets == nullptr)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (logits == nullptr || params == nullptr || out == nullptr || workspace == nullptr ||
      reinterpret_cast<uintptr_t>(workspace) % 256 != 0 ||
      workspace_bytes < sample_tokens_workspace_bytes(rows, vocab))
    return cudaErrorInvalidValue;
  const unsigned R = static_cast<unsigned>(rows);
  (void)detail::launch_kernel(prepare_kernel, R, kThreads, 0, stream, logits, vocab, params, adjust,
                              adjust_offsets, allowed, workspace);
  const unsigned chunks = static_cast<unsigned>((vocab + kWeightPerBlock - 1) / kWeightPerBlock);
  (void)detail::launch_kernel(weights_kernel, dim3(chunks, R), kWeightThreads, 0, stream, vocab,
                              workspace);
  (void)detail::launch_kernel(top_p_kernel, R, kThreads, 0, stream, vocab, params, workspace);
  return detail::launch_kernel(draw_kernel, R, kThreads, 0, stream, vocab, params, out, workspace);
}

}  // namespace dsv41::kernels
