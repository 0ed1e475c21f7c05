// Token embedding replicated to the hc streams (spec model-architecture.md §3; CPU reference
// ModelWeights::embed_row + the copy in Transformer::forward): H[t, k, d] = fp32(table[ids[t], d]).
// BF16 -> fp32 is a 16-bit shift, so the result is bit-equal. One thread per (t, d) reads the
// table (or, at an image-span position, the image row) once and writes the hc copies.
#include "common/launch.cuh"
#include "dsv41k/engram.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxStreams = 8;

__global__ void __launch_bounds__(kThreads)
    embed_rows_kernel(const int32_t* __restrict__ ids, const uint16_t* __restrict__ table,
                      const uint8_t* __restrict__ flags, const float* __restrict__ image_rows,
                      float* __restrict__ H, int64_t T, int hc, int64_t D, int64_t vocab) {
  detail::pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= T * D) return;
  const int64_t t = i / D, d = i % D;
  const int32_t id = ids[t];
  // An id outside the table would read foreign memory: NaN marks the row instead (the host
  // checks ids against the vocabulary before the launch, as embed_row does).
  float v;
  if (flags != nullptr && flags[t] != 0) {
    v = image_rows[t * D + d];
  } else {
    v = (id >= 0 && id < vocab) ? __uint_as_float(static_cast<uint32_t>(table[id * D + d]) << 16)
                                : __uint_as_float(0x7FC00000u);
  }
  float* h = H + t * hc * D + d;
  for (int k = 0; k < hc; ++k) h[k * D] = v;
}

cudaError_t launch_embed(const int32_t* ids, const uint16_t* table, const uint8_t* flags,
                         const float* image_rows, float* H, int64_t T, int hc, int64_t D,
                         int64_t vocab, cudaStream_t stream) {
  if (ids == nullptr || table == nullptr || H == nullptr || T < 0 || hc < 1 || hc > kMaxStreams ||
      D < 1 || vocab < 1)
    return cudaErrorInvalidValue;
  if (T > (int64_t{0x7FFFFFFF} * kThreads) / D) return cudaErrorInvalidValue;  // grid.x limit
  if (T == 0) return cudaSuccess;
  const int64_t n = T * D;
  return detail::launch_kernel(embed_rows_kernel,
                               static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                               stream, ids, table, flags, image_rows, H, T, hc, D, vocab);
}

}  // namespace

cudaError_t embed_rows(const int32_t* ids, const uint16_t* table, float* H, int64_t T, int hc,
                       int64_t D, int64_t vocab, cudaStream_t stream) {
  return launch_embed(ids, table, nullptr, nullptr, H, T, hc, D, vocab, stream);
}

cudaError_t embed_rows_with_images(const int32_t* ids, const uint16_t* table, const uint8_t* flags,
                                   const float* image_rows, float* H, int64_t T, int hc, int64_t D,
                                   int64_t vocab, cudaStream_t stream) {
  if (flags == nullptr || image_rows == nullptr) return cudaErrorInvalidValue;
  return launch_embed(ids, table, flags, image_rows, H, T, hc, D, vocab, stream);
}

}  // namespace dsv41::kernels
