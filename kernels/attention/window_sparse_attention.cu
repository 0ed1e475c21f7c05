// Window + sparse attention core (spec model-architecture.md §2.2 steps 4-6, §2.6), the CUDA
// twin of model/attention/window_sparse_attention.cpp, shaped as split-key flash decoding because
// every head reads the same keys (one K=V head, §2.2): the key list of token t is a virtual
// array of window + topk slots, slot j < window = position first + j (FP8 ring slot p % capacity,
// or this call's packed row p - pos0), slot window + i = selection id i (FP4 compressed entry),
// unused slots (j >= positions in the window, id -1) masked. The slots are cut into tiles of 16
// and the tiles into `splits` contiguous ranges; a block owns (token, split, group of 8 heads),
// decodes each tile once into shared memory as fp32 and runs the online softmax over it:
//   scores   warp = head, lanes l and l + 16 = key l, each half of head_dim (fp32 FMA, float4
//            smem reads), the halves added in order
//   rescale  m' = max(m, tile max), acc·exp(m - m'), l·exp(m - m') + Σ exp(s - m')
//   values   thread = (head, 4 channels), acc += Σ_j p_j·k_j
// With one split the block adds the sink and normalises; else it writes (m, l, acc) and
// combine_kernel merges the splits with the sink. Whichever writes o applies the inverse RoPE on
// the way out (one launch per layer fewer at decode; the prefill kernel uses rope_rotate).
// Calls whose head_dim is 64/128/256/512 go to the tensor-core kernel (attend_tc.cu): below 32
// tokens with the same key splits (32-key tiles, 16 heads per block) and this file's
// combine_kernel, from 32 tokens on one split per block. The split-key kernel here serves the
// other head dims: at one token of the released dims it was 40 tiles × 8 head groups = 320 blocks
// of one tile each, ~28 us under ncu on an H100 (latency chains at 0.6 waves), against which the
// tensor-core path was measured (docs/perf.md "Stop 32").
// An out-of-range selection id makes every row of its token NaN (the reference throws).
#include <cmath>
#include <cstdint>

#include "attention/attend_common.cuh"
#include "attention/attend_tc.cuh"
#include "attention/rope.cuh"
#include "common/launch.cuh"
#include "dsv41k/attention.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kTile = 16;     // key slots per tile (two lanes each in the score pass)
constexpr int kHeadsBlk = 8;  // heads per block (one warp each in the score pass)
constexpr int kThreads = 32 * kHeadsBlk;
constexpr int kMaxHeadDim = 512;  // acc registers: kHeadsBlk·head_dim/4 float4 over 256 threads
constexpr int kAccPerThread = kHeadsBlk * kMaxHeadDim / 4 / kThreads;  // 4
// Blocks to aim for: a 1-row step at the released dims gets one tile per block (40 splits × 8
// head groups); the block-level phases, not the SM count, set the time there.
constexpr int kTargetBlocks = 512;

using detail::AttendArgs;

__global__ void __launch_bounds__(kThreads) attend_kernel(AttendArgs a) {
  detail::pdl_begin();
  extern __shared__ __align__(16) float smem[];
  const int D = a.D, KS = D + 4;  // key row stride: float4 reads of 32 lanes hit 8 distinct slots
  const int64_t t = blockIdx.x / a.splits;
  const int split = static_cast<int>(blockIdx.x % a.splits);
  const int h0 = blockIdx.y * kHeadsBlk;
  const int heads = min(kHeadsBlk, a.H - h0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* e4m3 = smem;                     // [256]
  float* e2m1 = e4m3 + 256;               // [16]
  float* qs = e2m1 + 16;                  // [kHeadsBlk, D] (offset 272 floats: 16-byte aligned)
  float* ks = qs + kHeadsBlk * D;         // [kTile, D + 4]
  float* ps = ks + kTile * KS;            // [kHeadsBlk, kTile] probabilities of the tile
  float* alpha = ps + kHeadsBlk * kTile;  // [kHeadsBlk] rescale of the tile
  __shared__ const uint8_t* src[kTile];
  __shared__ int fp8_key[kTile];
  __shared__ int bad;

  detail::fill_value_tables(e4m3, e2m1);
  for (int i = threadIdx.x; i < kHeadsBlk * D; i += kThreads) {
    const int w = i / D;
    qs[i] = w < heads ? a.q[(t * a.H + h0 + w) * D + i % D] : 0.0f;
  }
  if (threadIdx.x == 0) bad = 0;

  const int n4 = D / 4;
  float m_run = -INFINITY, l_run = 0.0f;  // per warp (= head), same in every lane
  float4 acc[kAccPerThread];
#pragma unroll
  for (int k = 0; k < kAccPerThread; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);

  const int tb = split * a.tiles_per_split;
  const int te = min(a.n_tiles, tb + a.tiles_per_split);
  for (int tile = tb; tile < te; ++tile) {
    __syncthreads();  // tables/q written; the previous tile's keys and probabilities consumed
    if (threadIdx.x < kTile) {
      int fp8 = 0;
      src[threadIdx.x] = detail::key_slot(a, t, tile * kTile + threadIdx.x, &fp8, &bad);
      fp8_key[threadIdx.x] = fp8;
    }
    __syncthreads();
    // Decode the tile: item = (key e, channels 4c..4c+3); unrolled so several items' loads are
    // in flight (16 dependent byte-load rounds per thread made this ~8 us of a 36 us decode call).
#pragma unroll 4
    for (int i = threadIdx.x; i < kTile * n4; i += kThreads) {
      const int e = i / n4, c = 4 * (i % n4);
      const uint8_t* p = src[e];
      const float4 v = p != nullptr ? detail::decode_key4(p, fp8_key[e] != 0, c, D, e4m3, e2m1)
                                    : make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<float4*>(ks + e * KS + c) = v;
    }
    __syncthreads();
    // Scores and the online-softmax update of this warp's head: lanes key and key + 16 hold the
    // two halves of the dot and then the same score.
    if (warp < heads) {
      const int key = lane % kTile, half = lane / kTile;
      const bool valid = src[key] != nullptr;
      float part = 0.0f;
      if (valid) {
        const int n4h = n4 / 2;  // float4s per half (D % 32 == 0)
        const float4* q4 = reinterpret_cast<const float4*>(qs + warp * D) + half * n4h;
        const float4* k4 = reinterpret_cast<const float4*>(ks + key * KS) + half * n4h;
        // 8 independent FMA chains (per float4 component, even / odd chunk). Any order meets the
        // bound (docs/kernels.md).
        float4 d0 = make_float4(0.f, 0.f, 0.f, 0.f), d1 = d0;
        for (int c = 0; c < n4h; c += 2) {
          const float4 qa = q4[c], ka = k4[c];
          d0.x = fmaf(qa.x, ka.x, d0.x);
          d0.y = fmaf(qa.y, ka.y, d0.y);
          d0.z = fmaf(qa.z, ka.z, d0.z);
          d0.w = fmaf(qa.w, ka.w, d0.w);
          if (c + 1 < n4h) {
            const float4 qb = q4[c + 1], kb = k4[c + 1];
            d1.x = fmaf(qb.x, kb.x, d1.x);
            d1.y = fmaf(qb.y, kb.y, d1.y);
            d1.z = fmaf(qb.z, kb.z, d1.z);
            d1.w = fmaf(qb.w, kb.w, d1.w);
          }
        }
        part = ((d0.x + d1.x) + (d0.y + d1.y)) + ((d0.z + d1.z) + (d0.w + d1.w));
      }
      const float other = __shfl_xor_sync(0xffffffffu, part, kTile);
      const float s =
          valid ? __fmul_rn(half == 0 ? part + other : other + part, a.scale) : -INFINITY;
      // Reductions over the tile's keys: offsets < kTile stay within each half (same values).
      float mt = s;
      for (int off = kTile / 2; off > 0; off /= 2)
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
      const float m_new = fmaxf(m_run, mt);
      float p = 0.0f, al = 1.0f;
      if (m_new != -INFINITY) {
        p = valid ? expf(s - m_new) : 0.0f;
        al = m_run == -INFINITY ? 0.0f : expf(m_run - m_new);
      }
      float sum = p;
      for (int off = kTile / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l_run = l_run * al + sum;
      m_run = m_new;
      if (half == 0) ps[warp * kTile + key] = p;
      if (lane == 0) alpha[warp] = al;
    } else if (warp < kHeadsBlk) {
      if (lane < kTile) ps[warp * kTile + lane] = 0.0f;
      if (lane == 0) alpha[warp] = 1.0f;
    }
    __syncthreads();
    // Values: acc[h, c..c+3] = acc·alpha[h] + Σ_j p[h, j]·k_j[c..c+3].
#pragma unroll
    for (int k = 0; k < kAccPerThread; ++k) {
      const int idx = threadIdx.x + k * kThreads;
      if (idx >= kHeadsBlk * n4) break;
      const int h = idx / n4, c = 4 * (idx % n4);
      const float al = alpha[h];
      float4 r = make_float4(acc[k].x * al, acc[k].y * al, acc[k].z * al, acc[k].w * al);
      const float* ph = ps + h * kTile;
      for (int j = 0; j < kTile; ++j) {
        const float pj = ph[j];
        const float4 kv = *reinterpret_cast<const float4*>(ks + j * KS + c);
        r.x = fmaf(pj, kv.x, r.x);
        r.y = fmaf(pj, kv.y, r.y);
        r.z = fmaf(pj, kv.z, r.z);
        r.w = fmaf(pj, kv.w, r.w);
      }
      acc[k] = r;
    }
  }
  __syncthreads();
  const bool is_bad = bad != 0;
  if (a.splits == 1) {  // add the sink and normalise here
    if (warp < heads && lane == 0)
      alpha[warp] = detail::finish_factor(a.sink[h0 + warp], m_run, l_run, is_bad);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kAccPerThread; ++k) {
      const int idx = threadIdx.x + k * kThreads;
      if (idx >= kHeadsBlk * n4) break;
      const int h = idx / n4, c = 4 * (idx % n4);
      if (h >= heads) continue;
      const float f = alpha[h];
      *reinterpret_cast<float4*>(a.o + (t * a.H + h0 + h) * D + c) =
          detail::inverse_rope4(make_float4(acc[k].x * f, acc[k].y * f, acc[k].z * f, acc[k].w * f),
                                c, D, a.rope_dim, a.inv_freq, a.pos0 + t);
    }
    return;
  }
  const int64_t stride = D + 4;  // float4-aligned rows
#pragma unroll
  for (int k = 0; k < kAccPerThread; ++k) {
    const int idx = threadIdx.x + k * kThreads;
    if (idx >= kHeadsBlk * n4) break;
    const int h = idx / n4, c = 4 * (idx % n4);
    if (h >= heads) continue;
    float* dst = a.part + ((t * a.H + h0 + h) * a.splits + split) * stride;
    *reinterpret_cast<float4*>(dst + c) = acc[k];
  }
  if (warp < heads && lane == 0) {
    float* dst = a.part + ((t * a.H + h0 + warp) * a.splits + split) * stride;
    dst[D] = m_run;
    dst[D + 1] = is_bad ? __int_as_float(0x7fc00000) : l_run;
  }
}

// One block per (token, head): o = Σ_s w_s·acc_s / (exp(sink - m) + Σ_s w_s·l_s), w_s =
// exp(m_s - m), m = max(sink, m_s); a NaN l_s (bad selection id) makes the row NaN; then the
// inverse RoPE of the token's position pos0 + t. Warp 0 reads
// the splits' (m, l) in parallel (one thread walking 20 splits of dependent loads took ~23 us
// per layer under ncu); the denominator's sum is a warp tree, not sequential.
__global__ void combine_kernel(const float* part, const float* sink, float* o, int H, int D,
                               int splits, const float* __restrict__ inv_freq, int rope_dim,
                               int64_t pos0) {
  detail::pdl_begin();
  __shared__ float w[64];
  __shared__ float inv;
  const int64_t th = blockIdx.x;
  const int h = static_cast<int>(th % H);
  const int64_t stride = D + 4;
  const float* base = part + th * splits * stride;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const float sk = sink[h];
    float m = sk;
    bool nan = false;
    for (int s = lane; s < splits; s += 32) {
      m = fmaxf(m, base[s * stride + D]);
      nan = nan || isnan(base[s * stride + D + 1]);
    }
#pragma unroll
    for (int k = 16; k >= 1; k >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, k));
    nan = __any_sync(0xFFFFFFFFu, nan);
    float denom = 0.0f;
    for (int s = lane; s < splits; s += 32) {
      const float ms = base[s * stride + D];
      const float ws = ms == -INFINITY ? 0.0f : expf(ms - m);
      w[s] = ws;
      denom += ws * base[s * stride + D + 1];
    }
#pragma unroll
    for (int k = 16; k >= 1; k >>= 1) denom += __shfl_xor_sync(0xFFFFFFFFu, denom, k);
    if (lane == 0) inv = nan ? __int_as_float(0x7fc00000) : 1.0f / (expf(sk - m) + denom);
  }
  __syncthreads();
  // Thread = 4 channels (D % 32 == 0, rows float4-aligned); 4 splits' loads in flight per step,
  // added in split order as before (one float per thread per load left this ~22 us per layer).
  const float f = inv;
  for (int c4 = threadIdx.x; c4 < D / 4; c4 += blockDim.x) {
    const float4* col = reinterpret_cast<const float4*>(base) + c4;
    const int64_t s4 = stride / 4;
    float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
    int s = 0;
    for (; s + 4 <= splits; s += 4) {
      float4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = col[(s + j) * s4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float ws = w[s + j];
        r = make_float4(fmaf(ws, v[j].x, r.x), fmaf(ws, v[j].y, r.y), fmaf(ws, v[j].z, r.z),
                        fmaf(ws, v[j].w, r.w));
      }
    }
    for (; s < splits; ++s) {
      const float4 v = col[s * s4];
      const float ws = w[s];
      r = make_float4(fmaf(ws, v.x, r.x), fmaf(ws, v.y, r.y), fmaf(ws, v.z, r.z),
                      fmaf(ws, v.w, r.w));
    }
    reinterpret_cast<float4*>(o + th * D)[c4] =
        detail::inverse_rope4(make_float4(r.x * f, r.y * f, r.z * f, r.w * f), 4 * c4, D, rope_dim,
                              inv_freq, pos0 + th / H);
  }
}

size_t smem_bytes(int D) {
  return (272 + static_cast<size_t>(kHeadsBlk) * D + static_cast<size_t>(kTile) * (D + 4) +
          kHeadsBlk * kTile + kHeadsBlk) *
         4;
}

struct Plan {
  int n_tiles, splits, tiles_per_split;
};

// Splits of the key list for a kernel of `tile` keys per tile and `heads_blk` heads per block:
// about kTargetBlocks blocks, at most one split per tile and 64 (combine_kernel's weight table),
// and no more than the workspace holds.
Plan plan(int64_t T, int heads, int window, int topk, size_t workspace_bytes, int D, int tile,
          int heads_blk) {
  Plan p;
  p.n_tiles = (window + topk + tile - 1) / tile;
  const int64_t base = T * ((heads + heads_blk - 1) / heads_blk);
  int64_t s = (kTargetBlocks + base - 1) / base;
  s = s < 1 ? 1 : (s > p.n_tiles ? p.n_tiles : s);
  s = s > 64 ? 64 : s;  // combine_kernel's weight table
  const size_t per_split = static_cast<size_t>(T) * heads * (D + 4) * 4;
  if (s > 1 && per_split * s > workspace_bytes) s = workspace_bytes / per_split;
  if (s < 1) s = 1;
  p.tiles_per_split = static_cast<int>((p.n_tiles + s - 1) / s);
  p.splits = (p.n_tiles + p.tiles_per_split - 1) / p.tiles_per_split;
  if (p.splits < 1) p.splits = 1;
  return p;
}

// The plan of the kernel that serves (T, head_dim): the tensor-core kernel's below
// kAttendTcMinTokens where it supports head_dim (from there on its one split per block needs no
// plan), else the split-key kernel's.
Plan plan_for(int64_t T, int heads, int window, int topk, size_t workspace_bytes, int D) {
  if (detail::attend_tc_supported(D))
    return plan(T, heads, window, topk, workspace_bytes, D, detail::kAttendTcKeys,
                detail::kAttendTcHeads);
  return plan(T, heads, window, topk, workspace_bytes, D, kTile, kHeadsBlk);
}

}  // namespace

size_t window_sparse_attention_workspace_bytes(int64_t T, int heads, int head_dim, int window,
                                               int topk) {
  if (T < 1 || heads < 1 || head_dim < 1 || window < 1 || topk < 0) return 0;
  if (T >= detail::kAttendTcMinTokens && detail::attend_tc_supported(head_dim)) return 0;
  const Plan p = plan_for(T, heads, window, topk, SIZE_MAX, head_dim);
  return p.splits > 1 ? static_cast<size_t>(T) * heads * p.splits * (head_dim + 4) * 4 : 0;
}

cudaError_t window_sparse_attention(const float* q, const uint8_t* new_packed, const uint8_t* ring,
                                    int capacity, const uint8_t* compressed, int64_t n_entries,
                                    const int32_t* index, int topk, const float* sink,
                                    const float* inv_freq, float* o, int64_t T, int heads,
                                    int head_dim, int rope_dim, int window, int64_t pos0,
                                    void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int D = head_dim;
  if (T < 0 || T > INT32_MAX / 64 || heads < 1 || heads > 65535 || D < 32 || D % 32 != 0 ||
      D > kMaxHeadDim || rope_dim < 2 || rope_dim % 2 != 0 || rope_dim > D || window < 1 ||
      window > 65536 || capacity < window || pos0 < 0 || topk < 0 || topk > 65536 || n_entries < 0)
    return cudaErrorInvalidValue;
  if (q == nullptr || new_packed == nullptr || sink == nullptr || inv_freq == nullptr ||
      o == nullptr || (pos0 > 0 && ring == nullptr) || (topk > 0 && index == nullptr) ||
      (n_entries > 0 && compressed == nullptr) || (workspace_bytes > 0 && workspace == nullptr))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const float scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  const bool tc = detail::attend_tc_supported(D);
  Plan p;
  if (tc && T >= detail::kAttendTcMinTokens) {
    p.n_tiles = p.tiles_per_split =
        (window + topk + detail::kAttendTcKeys - 1) / detail::kAttendTcKeys;
    p.splits = 1;
  } else {
    p = plan_for(T, heads, window, topk, workspace_bytes, D);
  }
  // The tensor-core kernel ignores inv_freq / rope_dim (its one-split calls rotate afterwards).
  const AttendArgs a{q,         new_packed,
                     ring,      compressed,
                     index,     sink,
                     o,         static_cast<float*>(workspace),
                     T,         n_entries,
                     pos0,      heads,
                     D,         window,
                     capacity,  topk,
                     p.splits,  p.tiles_per_split,
                     p.n_tiles, scale,
                     inv_freq,  rope_dim};
  if (tc) {
    if (const cudaError_t e = detail::attend_tc(a, stream); e != cudaSuccess) return e;
    if (p.splits == 1)
      return rope_rotate(o, inv_freq, T, heads, D, rope_dim, pos0, 1, true, stream);
  } else {
    const size_t smem = smem_bytes(D);
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(attend_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)) != cudaSuccess) {
      (void)cudaGetLastError();
      return cudaErrorInvalidValue;
    }
    const dim3 grid(static_cast<unsigned>(T * p.splits),
                    static_cast<unsigned>((heads + kHeadsBlk - 1) / kHeadsBlk));
    (void)detail::launch_kernel(attend_kernel, grid, kThreads, smem, stream, a);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess || p.splits == 1) return e;
  }
  (void)detail::launch_kernel(combine_kernel, static_cast<unsigned>(T * heads), 128, 0, stream,
                              a.part, sink, o, heads, D, p.splits, inv_freq, rope_dim, pos0);
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
