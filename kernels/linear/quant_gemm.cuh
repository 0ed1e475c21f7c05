// Tensor-core GEMM over a quantised weight, for prefill chunks and large expert buckets (the
// GEMV of quant_gemv.cuh re-reads and re-decodes every weight once per 16 rows and is FMA-issue
// bound from ~4 rows on: 64 FLOP per FP4 weight byte at 16 rows).
//
// y[rows, out] = x[rows, in] · Wᵀ with mma.sync m16n8k16 (bf16 in, fp32 accumulate; sm_80+, so
// the same code serves sm_90 and sm_121). A block owns 64 activation rows × 128 weight rows and
// walks k in steps of 32 (one scale block of both formats): each weight element is decoded once
// per block into shared memory as bf16 — exact, e4m3 and e2m1 codes times a power-of-two scale
// have at most 4 significant bits — and x is split into three bf16 parts hi = bf16(x),
// mid = bf16(x − hi), lo = bf16(x − hi − mid), each multiplied (three MMAs), so x keeps the 24
// significant bits of fp32. Two parts (16 bits, |x − hi − mid| <= 2^-17·|x|) pass the GEMV op bound
// but move tiny40's end-to-end logits 3.1 from the CPU's (an FP8 fake-quant flip at row 3 of
// prompt2, H200): the prefill projections must round like the fp32 reference does.
// 8 warps as 2 (rows) × 4 (outputs), 32 × 32 outputs each.
// The next k step's global loads are issued before the current step's MMAs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "linear/fp4_row32.cuh"
#include "linear/quant_gemv.cuh"

namespace dsv41::kernels::detail {

inline constexpr int kGemmBM = 64;        // activation rows per block
inline constexpr int kGemmBN = 128;       // weight (output) rows per block
inline constexpr int kGemmBK = 32;        // k per step
inline constexpr int kGemmThreads = 256;  // 8 warps
inline constexpr int kGemmLd =
    kGemmBK + 8;  // bf16 per shared row: 80 B, fragment loads on 32 banks

// FP8 e4m3 [out, in] + E8M0 [ceil(out/32), ceil(in/32)]: W[row, k0 .. k0 + 16).
struct GemmFp8Block {
  __device__ __forceinline__ static void load16(const uint8_t* w, const uint8_t* scale, int64_t in,
                                                int64_t row, int64_t k0, float (&v)[16]) {
    const uint4 c = load_stream_u4(w + row * in + k0);
    const float s = e8m0_to_float(__ldg(scale + (row / 32) * ((in + 31) / 32) + k0 / 32));
    const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>(words[i] & 0xFFFFu), __NV_E4M3);
      const __half2_raw hi =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[i] >> 16), __NV_E4M3);
      const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
      v[4 * i + 0] = a.x * s;
      v[4 * i + 1] = a.y * s;
      v[4 * i + 2] = b.x * s;
      v[4 * i + 3] = b.y * s;
    }
  }
};

// Release FP4: I8 [out, in/2] (even column = low nibble) + E8M0 [out, in/32].
struct GemmFp4Row {
  __device__ __forceinline__ static void load16(const uint8_t* w, const uint8_t* scale, int64_t in,
                                                int64_t row, int64_t k0, float (&v)[16]) {
    const uint2 c = __ldg(reinterpret_cast<const uint2*>(w + row * (in / 2) + k0 / 2));
    // nibbles_to_float2 gives e2m1 · 2^-14; 2^14 · 2^(e-127) is applied in two exact steps.
    const float s = e8m0_to_float(__ldg(scale + row * (in / 32) + k0 / 32));
    const uint32_t words[2] = {c.x, c.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {  // nibbles k and k + 4 of the word
        const float2 f = Fp4Row32::nibbles_to_float2(words[i] >> (4 * k));
        v[8 * i + k] = (f.x * Fp4Row32::kScalePostMul) * s;
        v[8 * i + k + 4] = (f.y * Fp4Row32::kScalePostMul) * s;
      }
    }
  }
};

// BF16 [out, in] (head, router gate, compressor, indexer projections): already exact in bf16;
// `scale` is unused.
struct GemmBf16Row {
  __device__ __forceinline__ static void load16(const uint8_t* w, const uint8_t* /*scale*/,
                                                int64_t in, int64_t row, int64_t k0,
                                                float (&v)[16]) {
    const uint4* p = reinterpret_cast<const uint4*>(w + (row * in + k0) * 2);
    const uint4 c[2] = {load_stream_u4(reinterpret_cast<const uint8_t*>(p)),
                        load_stream_u4(reinterpret_cast<const uint8_t*>(p + 1))};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t words[4] = {c[h].x, c[h].y, c[h].z, c[h].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[8 * h + 2 * i] = __uint_as_float(words[i] << 16);
        v[8 * h + 2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
      }
    }
  }
};

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t smem_u32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// One block: x rows [0, rows) (rows <= kGemmBM) of x [*, in] times weight rows [n0, n0 + 128) of
// W [out, in], into y [*, out]. Needs in % 32 == 0, x 16-byte aligned, in % 4 == 0 rows.
template <class Fmt>
__device__ __forceinline__ void quant_gemm_block(const float* __restrict__ x,
                                                 const uint8_t* __restrict__ w,
                                                 const uint8_t* __restrict__ scale,
                                                 float* __restrict__ y, int rows, int64_t out,
                                                 int64_t in, int64_t n0) {
  constexpr int kParts = 3;  // hi, mid, lo
  __shared__ __align__(16) __nv_bfloat16 xs[kParts][kGemmBM][kGemmLd];
  __shared__ __align__(16) __nv_bfloat16 ws[kGemmBN][kGemmLd];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int wm = (warp >> 2) * 32, wn = (warp & 3) * 32;

  // Loader roles: weight row wr, k half wk (16 values); x float4s tid and tid + 256 of the
  // 64 × 8 float4 tile. Weight rows past `out` read row out - 1 and are never stored.
  const int wr = tid >> 1, wk = (tid & 1) * 16;
  const int64_t wrow = n0 + wr < out ? n0 + wr : out - 1;
  float wv[16];
  float4 xv[2];
  auto fetch = [&](int64_t k0) {
    Fmt::load16(w, scale, in, wrow, k0 + wk, wv);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int idx = tid + j * kGemmThreads, r = idx >> 3, c4 = idx & 7;
      xv[j] = r < rows ? __ldg(reinterpret_cast<const float4*>(x + r * in + k0) + c4)
                       : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  const int64_t steps = in / kGemmBK;
  fetch(0);
  for (int64_t st = 0; st < steps; ++st) {
    __syncthreads();  // the previous step's fragments are read
#pragma unroll
    for (int i = 0; i < 16; i += 2)
      *reinterpret_cast<__nv_bfloat162*>(&ws[wr][wk + i]) = __floats2bfloat162_rn(wv[i], wv[i + 1]);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int idx = tid + j * kGemmThreads, r = idx >> 3, c = (idx & 7) * 4;
      const float v[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};
#pragma unroll
      for (int q = 0; q < 4; q += 2) {
        float rest0 = v[q], rest1 = v[q + 1];
#pragma unroll
        for (int p = 0; p < kParts; ++p) {
          const __nv_bfloat162 part = __floats2bfloat162_rn(rest0, rest1);
          *reinterpret_cast<__nv_bfloat162*>(&xs[p][r][c + q]) = part;
          rest0 -= __low2float(part);
          rest1 -= __high2float(part);
        }
      }
    }
    __syncthreads();
    if (st + 1 < steps) fetch((st + 1) * kGemmBK);  // in flight during the MMAs
#pragma unroll
    for (int kk = 0; kk < kGemmBK; kk += 16) {
      uint32_t b[4][2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __nv_bfloat16* wp = &ws[wn + j * 8 + g][kk + tq * 2];
        b[j][0] = smem_u32(wp);
        b[j][1] = smem_u32(wp + 8);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = wm + i * 16 + g;
#pragma unroll
        for (int p = kParts - 1; p >= 0; --p) {  // smallest part first
          uint32_t a[4];
          a[0] = smem_u32(&xs[p][r][kk + tq * 2]);
          a[1] = smem_u32(&xs[p][r + 8][kk + tq * 2]);
          a[2] = smem_u32(&xs[p][r][kk + 8 + tq * 2]);
          a[3] = smem_u32(&xs[p][r + 8][kk + 8 + tq * 2]);
#pragma unroll
          for (int j = 0; j < 4; ++j) mma_bf16_16816(acc[i][j], a, b[j]);
        }
      }
    }
  }
  // C fragment: (row g, cols 2tq, 2tq + 1) and (row g + 8, same cols) of each 16 × 8 tile.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm + i * 16 + g + 8 * h;
        const int64_t o = n0 + wn + j * 8 + tq * 2;
        if (r >= rows) continue;
        if (o < out) y[r * out + o] = acc[i][j][2 * h];
        if (o + 1 < out) y[r * out + o + 1] = acc[i][j][2 * h + 1];
      }
}

}  // namespace dsv41::kernels::detail
