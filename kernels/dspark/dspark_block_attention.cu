// §6.3 DSpark block attention core (CPU reference: dsv41::dspark_attend): the K queries of a draft
// block against the stage's context rows and all K block rows (no causal mask inside the block).
// One block of 256 threads per (head, query row): warps score the keys (lanes over 4-channel
// groups, warp-shuffle sums), the block reduces the max and the denominator with the sink, then
// each thread sums p_j · key_j over its channels in key order (the reference's order and
// unfused roundings) and applies the inverse RoPE. Keys are decoded as window_sparse_attention
// decodes them (attend_common.cuh). At the released sizes (K 5, 64 heads, 128 + 5 keys of 512)
// this is ~22 M multiply-adds per stage.
#include "attention/attend_common.cuh"
#include "attention/rope.cuh"
#include "common/launch.cuh"
#include "dsv41k/dspark.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ const uint8_t* key_row(const uint8_t* ctx, int64_t capacity,
                                                  int64_t first, int64_t n_ctx,
                                                  const uint8_t* block, int64_t j, int bytes) {
  return j < n_ctx ? ctx + ((first + j) % capacity) * bytes : block + (j - n_ctx) * bytes;
}

__device__ __forceinline__ float block_max(float v, float* red) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, m));
  __syncthreads();  // red may still be read by a previous reduction
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kWarps; ++w) r = fmaxf(r, red[w]);
  return r;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, m);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kWarps; ++w) r += red[w];
  return r;
}

// Dynamic shared memory: q [D], the n_ctx + K scores / weights, the e4m3 table [256].
__global__ void __launch_bounds__(kThreads)
    dspark_block_attention_kernel(const float* __restrict__ q, const uint8_t* __restrict__ ctx,
                                  int64_t capacity, int64_t first, int64_t n_ctx,
                                  const uint8_t* __restrict__ block, const float* __restrict__ sink,
                                  const float* __restrict__ inv_freq, float* __restrict__ o, int H,
                                  int D, int R, int64_t pos0, float scale) {
  extern __shared__ float smem[];
  __shared__ float red[kWarps];
  const int h = blockIdx.x, t = blockIdx.y, K = gridDim.y;
  const int64_t n = n_ctx + K;
  float* qs = smem;
  float* p = qs + D;
  float* e4m3 = p + n;
  const int bytes = D + D / 32;
  detail::pdl_begin();
  for (int i = threadIdx.x; i < 256; i += kThreads)
    e4m3[i] = detail::e4m3_value(static_cast<uint8_t>(i));
  const float* qrow = q + (static_cast<int64_t>(t) * H + h) * D;
  for (int c = threadIdx.x; c < D; c += kThreads) qs[c] = qrow[c];
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t j = warp; j < n; j += kWarps) {
    const uint8_t* k = key_row(ctx, capacity, first, n_ctx, block, j, bytes);
    float acc = 0.0f;
    for (int c = 4 * lane; c < D; c += 128) {
      const float4 kv = detail::decode_key4(k, true, c, D, e4m3, nullptr);
      acc = fmaf(qs[c], kv.x, acc);
      acc = fmaf(qs[c + 1], kv.y, acc);
      acc = fmaf(qs[c + 2], kv.z, acc);
      acc = fmaf(qs[c + 3], kv.w, acc);
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, m);
    if (lane == 0) p[j] = __fmul_rn(acc, scale);
  }
  __syncthreads();
  const float s = sink[h];
  float mx = s;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) mx = fmaxf(mx, p[j]);
  mx = block_max(mx, red);
  float l = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const float ej = expf(__fsub_rn(p[j], mx));
    p[j] = ej;
    l += ej;
  }
  const float denom = __fadd_rn(expf(__fsub_rn(s, mx)), block_sum(l, red));
  for (int64_t j = threadIdx.x; j < n; j += kThreads) p[j] = __fdiv_rn(p[j], denom);
  __syncthreads();
  float* orow = o + (static_cast<int64_t>(t) * H + h) * D;
  for (int c = 4 * threadIdx.x; c < D; c += 4 * kThreads) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float4 kv = detail::decode_key4(key_row(ctx, capacity, first, n_ctx, block, j, bytes),
                                            true, c, D, e4m3, nullptr);
      const float pj = p[j];
      acc.x = __fadd_rn(acc.x, __fmul_rn(pj, kv.x));
      acc.y = __fadd_rn(acc.y, __fmul_rn(pj, kv.y));
      acc.z = __fadd_rn(acc.z, __fmul_rn(pj, kv.z));
      acc.w = __fadd_rn(acc.w, __fmul_rn(pj, kv.w));
    }
    *reinterpret_cast<float4*>(orow + c) = detail::inverse_rope4(acc, c, D, R, inv_freq, pos0 + t);
  }
}

}  // namespace

cudaError_t dspark_block_attention(const float* q, const uint8_t* ctx, int64_t capacity,
                                   int64_t first, int64_t n_ctx, const uint8_t* block,
                                   const float* sink, const float* inv_freq, float* o, int64_t K,
                                   int heads, int head_dim, int rope_dim, int64_t pos0, float scale,
                                   cudaStream_t stream) {
  const int D = head_dim;
  if (q == nullptr || block == nullptr || sink == nullptr || inv_freq == nullptr || o == nullptr ||
      K < 1 || K > 65535 || heads < 1 || D < 32 || D > 1024 || D % 32 != 0 || rope_dim < 2 ||
      rope_dim > D || rope_dim % 2 != 0 || n_ctx < 0 || first < 0 || pos0 < 0 ||
      n_ctx + K > kDsparkMaxKeys || (n_ctx > 0 && (ctx == nullptr || capacity < n_ctx)))
    return cudaErrorInvalidValue;
  const size_t smem = static_cast<size_t>(D + n_ctx + K + 256) * sizeof(float);
  const auto kernel = dspark_block_attention_kernel;
  if (smem > 48 * 1024) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
        e != cudaSuccess)
      return e;
  }
  return detail::launch_kernel(kernel, dim3(static_cast<unsigned>(heads), static_cast<unsigned>(K)),
                               kThreads, smem, stream, q, ctx, capacity, first, n_ctx, block, sink,
                               inv_freq, o, heads, D, rope_dim, pos0, scale);
}

}  // namespace dsv41::kernels
