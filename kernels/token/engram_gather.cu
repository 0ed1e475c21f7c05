// Engram row gather (spec model-architecture.md §5.3; CPU reference engram::gather_rows):
// E[t, j·hd + c] = e4m3(table[id, c]) · 2^(scale[id, c/32] - 127), id = ids[t, j]. Both factors
// decode exactly to fp32 and the product is one rounded multiply (exact unless it leaves the
// normal range, where it rounds as the CPU's fp32 multiply does), so E is bit-equal. One thread per
// output element; a warp reads 32 consecutive bytes of one row (the table may be host memory).
#include "common/launch.cuh"
#include "dsv41k/engram.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kScaleBlock = 32;  // E8M0 granularity along a row

// e4m3fn as quant/dtype.cpp e4m3_to_f32: bias 7, subnormal man·2^-9, S.1111.111 = NaN.
__device__ __forceinline__ float e4m3_to_float(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 24, exp = (b >> 3) & 0xFu, man = b & 7u;
  if (exp == 15 && man == 7) return __uint_as_float(0x7FC00000u);
  if (exp == 0) return __uint_as_float(sign | __float_as_uint(static_cast<float>(man) * 0x1p-9f));
  return __uint_as_float(sign | ((exp + 120u) << 23) | (man << 20));
}

// E8M0 byte -> 2^(e-127); e = 0 is the fp32 subnormal 2^-127, 0xFF is NaN (quant/dtype.cpp).
__device__ __forceinline__ float e8m0_to_float(uint32_t e) {
  if (e == 0xFFu) return __uint_as_float(0x7FC00000u);
  return e == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23);
}

__global__ void __launch_bounds__(kThreads)
    engram_gather_kernel(const int64_t* __restrict__ ids, const uint8_t* __restrict__ table,
                         const uint8_t* __restrict__ table_scale, float* __restrict__ E, int64_t T,
                         int n_cols, int head_dim, int64_t table_rows) {
  detail::pdl_begin();
  const int64_t width = static_cast<int64_t>(n_cols) * head_dim;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * width) return;
  const int64_t t = i / width, col = i % width;
  const int j = static_cast<int>(col / head_dim), c = static_cast<int>(col % head_dim);
  const int64_t id = ids[t * n_cols + j];
  if (id < 0 || id >= table_rows) {  // never read outside the table
    E[i] = __uint_as_float(0x7FC00000u);
    return;
  }
  const float w = e4m3_to_float(table[id * head_dim + c]);
  const float s = e8m0_to_float(table_scale[id * (head_dim / kScaleBlock) + c / kScaleBlock]);
  E[i] = __fmul_rn(w, s);
}

}  // namespace

cudaError_t engram_gather(const int64_t* ids, const uint8_t* table, const uint8_t* table_scale,
                          float* E, int64_t T, int n_cols, int head_dim, int64_t table_rows,
                          cudaStream_t stream) {
  if (ids == nullptr || table == nullptr || table_scale == nullptr || E == nullptr || T < 0 ||
      n_cols < 1 || head_dim < 1 || head_dim % kScaleBlock != 0 || table_rows < 1)
    return cudaErrorInvalidValue;
  const int64_t width = static_cast<int64_t>(n_cols) * head_dim;
  if (T > (int64_t{0x7FFFFFFF} * kThreads) / width) return cudaErrorInvalidValue;  // grid.x
  if (T == 0) return cudaSuccess;
  const int64_t n = T * width;
  return detail::launch_kernel(engram_gather_kernel,
                               static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                               stream, ids, table, table_scale, E, T, n_cols, head_dim, table_rows);
}

}  // namespace dsv41::kernels
