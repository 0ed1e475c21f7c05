// Window + sparse attention core (spec model-architecture.md §2.2 steps 4-6, §2.6), the CUDA
// twin of model/attention/window_sparse_attention.cpp. One block per (token t, chunk of hpb
// heads), one warp per head. Keys of query t in the reference's order: window positions
// first..pos (old ones from the packed FP8 ring slot p % capacity, new ones from new_packed row
// p - pos0), then the non-negative selection ids (packed FP4 compressed rows). Keys are staged
// 32 at a time as packed bytes in shared memory; lane l owns key j0+l and computes its dot
// product sequentially over c with unfused fp32 mul/add, exactly the reference's order, so the
// scores are bit-identical. Max, exp (expf), the sequential denominator (lane 0, sink first)
// and o[c] = Σ_j p_j·k_j[c] (sequential over j, lane owns c) follow the reference; the inverse
// RoPE is the rope_rotate kernel. An out-of-range selection id makes the (t, heads) rows NaN.
#include <cmath>
#include <cstdint>

#include "dsv41k/attention.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kTile = 32;        // keys staged per step (one per lane)
constexpr int kMaxHeadsBlk = 8;  // warps per block

__device__ __forceinline__ float e4m3_value(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 7;
  if (exp == 15 && man == 7) return __int_as_float(0x7fc00000);
  const float v = exp == 0 ? ldexpf(static_cast<float>(man), -9)
                           : ldexpf(static_cast<float>(8 + man), exp - 10);
  return sign ? -v : v;
}

// e2m1: codes 0, 1 are 0, 0.5; code c >= 2 is (1 + (c & 1)/2)·2^((c >> 1) - 1); bit 3 = sign.
__device__ __forceinline__ float e2m1_value(int code) {
  const int c = code & 7;
  const float v = c < 2 ? 0.5f * static_cast<float>(c)
                        : ldexpf(1.0f + 0.5f * static_cast<float>(c & 1), (c >> 1) - 1);
  return (code & 8) ? -v : v;
}

struct Args {
  const float* q;
  const uint8_t* new_packed;
  const uint8_t* ring;
  const uint8_t* compressed;
  const int32_t* index;
  const float* sink;
  float* o;
  int64_t T, n_entries, pos0;
  int H, D, W, capacity, topk, hpb, stride;  // stride: staged entry bytes in shared memory
  float scale;
};

// Element c of the staged entry e (fp8: window FP8 layout, else compressed FP4 layout).
__device__ __forceinline__ float staged(const uint8_t* e, bool fp8, int D, int c,
                                        const float* e4m3) {
  if (fp8) return __fmul_rn(e4m3[e[c]], ldexpf(1.0f, static_cast<int>(e[D + c / 32]) - 127));
  const int code = (e[c / 2] >> (4 * (c & 1))) & 0xF;
  return __fmul_rn(e2m1_value(code), e4m3[e[D / 2 + c / 16]]);
}

__global__ void attend_kernel(Args a) {
  extern __shared__ float smem[];
  const int D = a.D, hpb = a.hpb;
  const int64_t t = blockIdx.x;
  const int h0 = blockIdx.y * hpb;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nthreads = blockDim.x;
  const int max_keys = a.W + a.topk;
  float* e4m3 = smem;                                              // [256]
  float* qs = e4m3 + 256;                                          // [hpb, D]
  float* acc = qs + hpb * D;                                       // [hpb, D]
  float* sc = acc + hpb * D;                                       // [hpb, max_keys]
  int32_t* sel = reinterpret_cast<int32_t*>(sc + hpb * max_keys);  // [topk]
  const uint8_t** src = reinterpret_cast<const uint8_t**>(
      reinterpret_cast<uintptr_t>(sel + a.topk + 2 + 1) & ~uintptr_t{7});  // [kTile]
  uint8_t* tile = reinterpret_cast<uint8_t*>(src + kTile);                 // [kTile, stride]
  __shared__ int n_sel, bad;

  const int64_t pos = a.pos0 + t;
  const int64_t first = pos - a.W + 1 > 0 ? pos - a.W + 1 : 0;
  const int nw = static_cast<int>(pos - first + 1);
  for (int i = threadIdx.x; i < 256; i += nthreads) e4m3[i] = e4m3_value(static_cast<uint8_t>(i));
  const int heads = min(hpb, a.H - h0);
  for (int i = threadIdx.x; i < hpb * D; i += nthreads) {
    const int w = i / D;
    qs[i] = w < heads ? a.q[(t * a.H + h0 + w) * D + i % D] : 0.0f;
    acc[i] = 0.0f;
  }
  if (threadIdx.x == 0) {  // compact the selection in order (the reference skips -1)
    int n = 0, b = 0;
    for (int i = 0; i < a.topk; ++i) {
      const int32_t id = a.index[t * a.topk + i];
      if (id < 0) continue;
      if (id >= a.n_entries) b = 1;
      sel[n++] = id;
    }
    n_sel = n;
    bad = b;
  }
  __syncthreads();
  const int nk = nw + n_sel;
  const bool bad_sel = bad != 0;
  const int fp8_bytes = D + D / 32, fp4_bytes = D / 2 + D / 16;
  const int w_head = warp < heads ? warp : -1;
  float* my_sc = sc + warp * max_keys;

  auto stage = [&](int j0) {  // keys [j0, j0 + kTile) into the tile
    if (threadIdx.x < kTile) {
      const int j = j0 + threadIdx.x;
      const uint8_t* p = nullptr;
      if (j < nw) {
        const int64_t k = first + j;
        p = k >= a.pos0 ? a.new_packed + (k - a.pos0) * fp8_bytes
                        : a.ring + (k % a.capacity) * fp8_bytes;
      } else if (j < nk && !bad_sel) {
        p = a.compressed + static_cast<int64_t>(sel[j - nw]) * fp4_bytes;
      }
      src[threadIdx.x] = p;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kTile * fp8_bytes; i += nthreads) {
      const int e = i / fp8_bytes, b = i % fp8_bytes;
      const int j = j0 + e;
      const int bytes = j < nw ? fp8_bytes : fp4_bytes;
      tile[e * a.stride + b] = (src[e] != nullptr && b < bytes) ? src[e][b] : 0;
    }
    __syncthreads();
  };

  // Pass 1: scores.
  for (int j0 = 0; j0 < nk; j0 += kTile) {
    stage(j0);
    const int j = j0 + lane;
    if (w_head >= 0 && j < nk) {
      const uint8_t* e = tile + lane * a.stride;
      const bool fp8 = j < nw;
      const float* qh = qs + warp * D;
      float dot = 0.0f;
      for (int c = 0; c < D; ++c)
        dot = __fadd_rn(dot, __fmul_rn(qh[c], staged(e, fp8, D, c, e4m3)));
      my_sc[j] = __fmul_rn(dot, a.scale);
    }
    __syncthreads();
  }
  // Softmax: m = max(sink, s_j); e_j = exp(s_j - m); denom sequential, sink first.
  __shared__ float denom_s[kMaxHeadsBlk];
  if (w_head >= 0) {
    const float sink = a.sink[h0 + warp];
    float m = sink;
    for (int j = lane; j < nk; j += 32) m = fmaxf(m, my_sc[j]);
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    __syncwarp();
    for (int j = lane; j < nk; j += 32) my_sc[j] = expf(__fsub_rn(my_sc[j], m));
    __syncwarp();
    if (lane == 0) {
      float d = expf(__fsub_rn(sink, m));
      for (int j = 0; j < nk; ++j) d = __fadd_rn(d, my_sc[j]);
      denom_s[warp] = d;
    }
    __syncwarp();
    const float d = denom_s[warp];
    for (int j = lane; j < nk; j += 32) my_sc[j] = __fdiv_rn(my_sc[j], d);
  }
  __syncthreads();
  // Pass 2: o[c] = Σ_j p_j·k_j[c], sequential over j.
  for (int j0 = 0; j0 < nk; j0 += kTile) {
    stage(j0);
    if (w_head >= 0) {
      float* oh = acc + warp * D;
      const int jn = min(kTile, nk - j0);
      for (int e = 0; e < jn; ++e) {
        const uint8_t* ent = tile + e * a.stride;
        const bool fp8 = j0 + e < nw;
        const float p = my_sc[j0 + e];
        for (int c = lane; c < D; c += 32)
          oh[c] = __fadd_rn(oh[c], __fmul_rn(p, staged(ent, fp8, D, c, e4m3)));
      }
    }
    __syncthreads();
  }
  if (w_head >= 0) {
    float* out = a.o + (t * a.H + h0 + warp) * D;
    const float* oh = acc + warp * D;
    for (int c = lane; c < D; c += 32) out[c] = bad_sel ? __int_as_float(0x7fc00000) : oh[c];
  }
}

size_t smem_bytes(int hpb, int D, int W, int topk, int stride) {
  size_t b = (256 + 2 * static_cast<size_t>(hpb) * D + static_cast<size_t>(hpb) * (W + topk)) * 4;
  b += (static_cast<size_t>(topk) + 3) * 4 + 8;  // selection + alignment of the pointer table
  b += kTile * sizeof(void*) + static_cast<size_t>(kTile) * stride;
  return b;
}

}  // namespace

cudaError_t window_sparse_attention(const float* q, const uint8_t* new_packed, const uint8_t* ring,
                                    int capacity, const uint8_t* compressed, int64_t n_entries,
                                    const int32_t* index, int topk, const float* sink,
                                    const float* inv_freq, float* o, int64_t T, int heads,
                                    int head_dim, int rope_dim, int window, int64_t pos0,
                                    cudaStream_t stream) {
  const int D = head_dim;
  if (T < 0 || T > INT32_MAX || heads < 1 || heads > 65535 || D < 32 || D % 32 != 0 || D > 4096 ||
      rope_dim < 2 || rope_dim % 2 != 0 || rope_dim > D || window < 1 || window > 65536 ||
      capacity < window || pos0 < 0 || topk < 0 || topk > 65536 || n_entries < 0)
    return cudaErrorInvalidValue;
  if (q == nullptr || new_packed == nullptr || sink == nullptr || inv_freq == nullptr ||
      o == nullptr || (pos0 > 0 && ring == nullptr) || (topk > 0 && index == nullptr) ||
      (n_entries > 0 && compressed == nullptr))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const int fp8_bytes = D + D / 32;
  const int stride = ((fp8_bytes + 3) / 4) | 1;  // odd word count: lanes hit distinct banks
  int hpb = heads < kMaxHeadsBlk ? heads : kMaxHeadsBlk;
  while (hpb > 1 && smem_bytes(hpb, D, window, topk, stride * 4) > 47 * 1024) hpb /= 2;
  const size_t smem = smem_bytes(hpb, D, window, topk, stride * 4);
  if (smem > 47 * 1024 &&
      cudaFuncSetAttribute(attend_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaErrorInvalidValue;
  }
  Args a{q,          new_packed, ring,
         compressed, index,      sink,
         o,          T,          n_entries,
         pos0,       heads,      D,
         window,     capacity,   topk,
         hpb,        stride * 4, static_cast<float>(std::pow(static_cast<double>(D), -0.5))};
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((heads + hpb - 1) / hpb));
  attend_kernel<<<grid, 32 * hpb, smem, stream>>>(a);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return rope_rotate(o, inv_freq, T, heads, D, rope_dim, pos0, 1, true, stream);
}

}  // namespace dsv41::kernels
