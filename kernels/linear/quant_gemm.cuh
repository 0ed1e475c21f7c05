// Tensor-core GEMM over a quantised weight, for prefill chunks and large expert buckets (the
// GEMV of quant_gemv.cuh re-reads and re-decodes every weight once per 16 rows and is FMA-issue
// bound from ~4 rows on: 64 FLOP per FP4 weight byte at 16 rows).
//
// y[rows, out] = x[rows, in] · Wᵀ with mma.sync m16n8k16 (bf16 in, fp32 accumulate; sm_80+, so
// the same code serves sm_90 and sm_121). A block owns 64 or 128 activation rows × 128 weight rows
// and walks k in steps of 32 (one scale block of both formats): each weight element is decoded
// once per block into shared memory as bf16, and x enters as 1, 2 or 3 bf16 parts (GemmX in
// dsv41k/launchers.hpp). Three parts hi = bf16(x), mid = bf16(x − hi), lo = bf16(x − hi − mid)
// keep the 24 significant bits of fp32 (three MMAs per product); two parts (16 bits,
// |x − hi − mid| <= 2^-17·|x|) pass the GEMV op bound but moved tiny40's end-to-end logits 3.1 from
// the CPU's (an FP8 fake-quant flip at row 3 of prompt2, H200), so the fp32-faithful mode keeps
// three; one part is the bf16-activation GEMM of other engines.
// Fragments come from shared memory by ldmatrix (one instruction per 16 × 16 A part or two 8-wide
// B tiles); the next k step's global loads are issued before the current step's MMAs and held as
// raw weight bytes + x floats.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "common/mma_sync.cuh"
#include "linear/fp4_row32.cuh"
#include "linear/quant_gemv.cuh"

namespace dsv41::kernels::detail {

inline constexpr int kGemmBN = 128;       // weight (output) rows per block
inline constexpr int kGemmBK = 32;        // k per step: one scale block of both formats
inline constexpr int kGemmThreads = 256;  // 8 warps
// bf16 per shared row: 80 B, so the 8 row addresses of an ldmatrix phase hit 8 distinct 16-byte
// bank groups.
inline constexpr int kGemmLd = kGemmBK + 8;

// Each format: Raw = the global bytes of 16 consecutive weights of one row (+ their scale), loaded
// a step ahead and held in registers across the MMAs (4-8 registers, not 16 floats); store()
// decodes them into 16 bf16 (exact: e4m3 and e2m1 codes times a power-of-two scale have at most 4
// significant bits) at a 16-byte aligned shared address.
__device__ __forceinline__ uint32_t pack_bf162(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// FP8 e4m3 [out, in] + E8M0 [ceil(out/32), ceil(in/32)].
struct GemmFp8Block {
  struct Raw {
    uint4 c;
    uint32_t s;
  };
  __device__ __forceinline__ static Raw load(const uint8_t* w, const uint8_t* scale, int64_t in,
                                             int64_t row, int64_t k0) {
    return {load_stream_u4(w + row * in + k0),
            __ldg(scale + (row / 32) * ((in + 31) / 32) + k0 / 32)};
  }
  __device__ __forceinline__ static void store(const Raw& r, __nv_bfloat16* dst) {
    const float s = e8m0_to_float(static_cast<uint8_t>(r.s));
    const uint32_t words[4] = {r.c.x, r.c.y, r.c.z, r.c.w};
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>(words[i] & 0xFFFFu), __NV_E4M3);
      const __half2_raw hi =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[i] >> 16), __NV_E4M3);
      const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
      o[2 * i] = pack_bf162(a.x * s, a.y * s);
      o[2 * i + 1] = pack_bf162(b.x * s, b.y * s);
    }
    reinterpret_cast<uint4*>(dst)[0] = make_uint4(o[0], o[1], o[2], o[3]);
    reinterpret_cast<uint4*>(dst)[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
};

// Release FP4: I8 [out, in/2] (even column = low nibble) + E8M0 [out, in/32].
struct GemmFp4Row {
  struct Raw {
    uint2 c;
    uint32_t s;
  };
  __device__ __forceinline__ static Raw load(const uint8_t* w, const uint8_t* scale, int64_t in,
                                             int64_t row, int64_t k0) {
    return {__ldg(reinterpret_cast<const uint2*>(w + row * (in / 2) + k0 / 2)),
            __ldg(scale + row * (in / 32) + k0 / 32)};
  }
  // nibbles_to_float2 gives e2m1 · 2^-14; the factor 2^14 · 2^(e-127) is one exact product when
  // it is a normal float (e <= 240: every scale of a real checkpoint), else two (the same values:
  // every product is a power of two times at most 2 significant bits).
  template <bool kOneProduct>
  __device__ __forceinline__ static void decode16(const Raw& r, float s, float (&v)[16]) {
    const float ss = Fp4Row32::kScalePostMul * s;
    const uint32_t words[2] = {r.c.x, r.c.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {  // nibbles k and k + 4 of the word: columns 8i + k, 8i + k + 4
        const float2 f = Fp4Row32::nibbles_to_float2(words[i] >> (4 * k));
        v[8 * i + k] = kOneProduct ? f.x * ss : (f.x * Fp4Row32::kScalePostMul) * s;
        v[8 * i + k + 4] = kOneProduct ? f.y * ss : (f.y * Fp4Row32::kScalePostMul) * s;
      }
    }
  }
  __device__ __forceinline__ static void store(const Raw& r, __nv_bfloat16* dst) {
    const uint8_t e = static_cast<uint8_t>(r.s);
    const float s = e8m0_to_float(e);
    float v[16];
    if (e <= 240)
      decode16<true>(r, s, v);
    else
      decode16<false>(r, s, v);
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = pack_bf162(v[2 * i], v[2 * i + 1]);
    reinterpret_cast<uint4*>(dst)[0] = make_uint4(o[0], o[1], o[2], o[3]);
    reinterpret_cast<uint4*>(dst)[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
};

// BF16 [out, in] (head, router gate, compressor, indexer projections): already exact in bf16, so
// the bytes go to shared memory as they are; `scale` is unused.
struct GemmBf16Row {
  struct Raw {
    uint4 c[2];
  };
  __device__ __forceinline__ static Raw load(const uint8_t* w, const uint8_t* /*scale*/, int64_t in,
                                             int64_t row, int64_t k0) {
    const uint8_t* p = w + (row * in + k0) * 2;
    return {{load_stream_u4(p), load_stream_u4(p + 16)}};
  }
  __device__ __forceinline__ static void store(const Raw& r, __nv_bfloat16* dst) {
    reinterpret_cast<uint4*>(dst)[0] = r.c[0];
    reinterpret_cast<uint4*>(dst)[1] = r.c[1];
  }
};

// One block: x rows [0, rows) (rows <= kBM) of x [*, in] times weight rows [n0, n0 + 128) of
// W [out, in], into y [*, out]. x enters as kParts bf16 parts (1: bf16(x); 2: + bf16(x − hi);
// 3: + the next 8 bits, i.e. all 24 significant bits of fp32), each multiplied by the exact bf16
// weights. kBM 64: 8 warps as 2 (rows) × 4 (outputs), 32 × 32 each; kBM 128: 4 × 2, 32 × 64 each
// (each decoded weight serves twice the rows). A warp skips the MMAs of its 16-row fragments that
// lie wholly past `rows`: routed-expert tiles at prefill hold ~32 of 64 rows (2048 tokens × 6 of
// 384 experts), so up to half the tensor work was padding. Needs in % 32 == 0, x 16-byte aligned,
// in % 4 == 0. The block walks k steps [st_begin, st_end) of kGemmBK (all in / kGemmBK of them
// unless a split-K launch gives it a range; its y is then that split's partial sum).
template <class Fmt, int kParts, int kBM>
__device__ __forceinline__ void quant_gemm_block(const float* __restrict__ x,
                                                 const uint8_t* __restrict__ w,
                                                 const uint8_t* __restrict__ scale,
                                                 float* __restrict__ y, int rows, int64_t out,
                                                 int64_t in, int64_t n0, int64_t st_begin,
                                                 int64_t st_end) {
  static_assert(kParts >= 1 && kParts <= 3 && (kBM == 64 || kBM == 128));
  constexpr int kWarpsN = 8 / (kBM / 32), kWN = kGemmBN / kWarpsN, kNJ = kWN / 8;
  constexpr int kXLoads = kBM * kGemmBK / 4 / kGemmThreads;  // float4s of x per thread and step
  __shared__ __align__(16) __nv_bfloat16 xs[kParts][kBM][kGemmLd];
  __shared__ __align__(16) __nv_bfloat16 ws[kGemmBN][kGemmLd];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int wm = (warp / kWarpsN) * 32, wn = (warp % kWarpsN) * kWN;
  // ldmatrix row addresses (common/mma_sync.cuh): A matrices (rows +0/+8, k +0/+8) by lane / 8,
  // B matrices (n +0, k +0), (n +0, k +8), (n +8, k +0), (n +8, k +8).
  const int a_row = wm + (lane & 15), a_col = (lane >> 4) * 8;
  const int b_row = wn + (lane & 7) + ((lane >> 4) << 3), b_col = ((lane >> 3) & 1) * 8;

  // Loader roles: weight row wr, k half wk (16 values); x float4s tid + 256 j of the kBM × 8
  // float4 tile. Weight rows past `out` read row out - 1 and are never stored.
  const int wr = tid >> 1, wk = (tid & 1) * 16;
  const int64_t wrow = n0 + wr < out ? n0 + wr : out - 1;
  typename Fmt::Raw wraw;
  float4 xv[kXLoads];
  auto fetch = [&](int64_t k0) {
    wraw = Fmt::load(w, scale, in, wrow, k0 + wk);
#pragma unroll
    for (int j = 0; j < kXLoads; ++j) {
      const int idx = tid + j * kGemmThreads, r = idx >> 3, c4 = idx & 7;
      xv[j] = r < rows ? __ldg(reinterpret_cast<const float4*>(x + r * in + k0) + c4)
                       : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };

  float acc[2][kNJ][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  // Rows past `rows` are zero once and never staged again (only the fragments that hold a live
  // row read them): at ~32 live rows of a 64-row routed tile the x split per step halves.
  for (int i = tid; i < kParts * kBM * kGemmLd / 8; i += kGemmThreads) {
    const int p = i / (kBM * kGemmLd / 8), rem = i - p * (kBM * kGemmLd / 8);
    const int r = rem / (kGemmLd / 8), c = (rem - r * (kGemmLd / 8)) * 8;
    if (r >= rows) *reinterpret_cast<uint4*>(&xs[p][r][c]) = make_uint4(0u, 0u, 0u, 0u);
  }
  fetch(st_begin * kGemmBK);
  for (int64_t st = st_begin; st < st_end; ++st) {
    __syncthreads();  // the previous step's fragments are read
    Fmt::store(wraw, &ws[wr][wk]);
#pragma unroll
    for (int j = 0; j < kXLoads; ++j) {
      const int idx = tid + j * kGemmThreads, r = idx >> 3, c = (idx & 7) * 4;
      if (r >= rows) continue;  // zero since the start
      float rest[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};
#pragma unroll
      for (int p = 0; p < kParts; ++p) {
        const uint32_t lo = pack_bf162(rest[0], rest[1]), hi = pack_bf162(rest[2], rest[3]);
        *reinterpret_cast<uint2*>(&xs[p][r][c]) = make_uint2(lo, hi);
        if (p + 1 < kParts) {
          rest[0] -= __uint_as_float(lo << 16);
          rest[1] -= __uint_as_float(lo & 0xFFFF0000u);
          rest[2] -= __uint_as_float(hi << 16);
          rest[3] -= __uint_as_float(hi & 0xFFFF0000u);
        }
      }
    }
    __syncthreads();
    if (st + 1 < st_end) fetch((st + 1) * kGemmBK);  // in flight during the MMAs
#pragma unroll
    for (int kk = 0; kk < kGemmBK; kk += 16) {
      uint32_t b[kNJ][2];
#pragma unroll
      for (int jp = 0; jp < kNJ / 2; ++jp) {
        uint32_t r[4];
        ldmatrix_x4(r, &ws[b_row + 16 * jp][kk + b_col]);
        b[2 * jp][0] = r[0];
        b[2 * jp][1] = r[1];
        b[2 * jp + 1][0] = r[2];
        b[2 * jp + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        if (wm + 16 * i >= rows) continue;  // all padding: warp-uniform, frees the tensor pipe
#pragma unroll
        for (int p = kParts - 1; p >= 0; --p) {  // smallest part first
          uint32_t a[4];
          ldmatrix_x4(a, &xs[p][a_row + 16 * i][kk + a_col]);
#pragma unroll
          for (int j = 0; j < kNJ; ++j) mma_bf16_16816(acc[i][j], a, b[j][0], b[j][1]);
        }
      }
    }
  }
  // C fragment: (row g, cols 2tq, 2tq + 1) and (row g + 8, same cols) of each 16 × 8 tile.
  const bool pairs = (out & 1) == 0;  // y rows start 8-byte aligned: one float2 store per pair
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm + i * 16 + g + 8 * h;
        const int64_t o = n0 + wn + j * 8 + tq * 2;
        if (r >= rows) continue;
        float* yp = y + r * out + o;
        if (pairs && o + 1 < out) {
          *reinterpret_cast<float2*>(yp) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        } else {
          if (o < out) yp[0] = acc[i][j][2 * h];
          if (o + 1 < out) yp[1] = acc[i][j][2 * h + 1];
        }
      }
}

}  // namespace dsv41::kernels::detail
