// KV fake-quantisation and packing (spec model-architecture.md §2.7, §2.8), bit for bit as the
// CPU reference: model/attention/kv_quant.cpp (the fake-quantisers), quant/dtype.cpp (e4m3 and
// e2m1 rounding, pow2_ceil) and kv/packed_formats.cpp (the canonical (code, scale) choice of
// pack()). Every step is an exact or correctly rounded fp32 operation (frexp/ldexp/rint, IEEE
// division, comparisons), mirrored statement by statement, so the results are identical.
// One thread per element (lanes of a warp form each block of 16 or 32 values): it reads its value
// once and writes it back (so xq may alias x), then its code byte (FP4: even lanes pack a pair).
#include <cmath>
#include <cstring>

#include "attention/rope.cuh"
#include "common/launch.cuh"
#include "dsv41k/attention.hpp"
#include "norm/rms_norm.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 128;

// Correctly rounded fp32 ops that nvcc cannot fuse; the host branch exists so the block logic can
// also be exercised on the CPU (it is the same arithmetic: IEEE fp32, no contraction).
__host__ __device__ __forceinline__ float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ __forceinline__ float fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
__host__ __device__ __forceinline__ float fsub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
__host__ __device__ __forceinline__ uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
#endif
}

__host__ __device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 7;
  if (exp == 15 && man == 7) return NAN;
  const float v = exp == 0 ? ldexpf(static_cast<float>(man), -9)
                           : ldexpf(static_cast<float>(8 + man), exp - 10);
  return sign ? -v : v;
}

// Nearest e4m3fn code, RNE, saturating at ±448, NaN -> 0x7F (dtype.cpp f32_to_e4m3).
__host__ __device__ __forceinline__ uint8_t f32_to_e4m3(float x) {
  if (isnan(x)) return 0x7F;
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  const float a = fabsf(x);
  if (a >= 448.0f) return sign | 0x7E;
  int e;
  frexpf(a, &e);
  int exp = e - 1;
  if (a == 0.0f || exp < -6) exp = -6;
  const float q = rintf(ldexpf(a, 3 - exp));
  float v = ldexpf(q, exp - 3);
  if (v > 448.0f) v = 448.0f;
  if (v == 0.0f) return sign;
  frexpf(v, &e);
  const int ve = e - 1;
  if (ve < -6) return sign | static_cast<uint8_t>(ldexpf(v, 9));
  const int man = static_cast<int>(ldexpf(v, 3 - ve)) - 8;
  return sign | static_cast<uint8_t>(((ve + 7) << 3) | man);
}

__host__ __device__ __forceinline__ float round_e4m3(float x) {
  return e4m3_to_f32(f32_to_e4m3(x));
}

__host__ __device__ __forceinline__ float e2m1_magnitude(int c) {
  switch (c & 7) {
    case 0:
      return 0.0f;
    case 1:
      return 0.5f;
    case 2:
      return 1.0f;
    case 3:
      return 1.5f;
    case 4:
      return 2.0f;
    case 5:
      return 3.0f;
    case 6:
      return 4.0f;
    default:
      return 6.0f;
  }
}

__host__ __device__ __forceinline__ float e2m1_to_f32(uint8_t code) {
  const float v = e2m1_magnitude(code);
  return (code & 8) ? -v : v;
}

// Nearest e2m1 code, ties to the even code, sign of -0 kept (dtype.cpp f32_to_e2m1).
__host__ __device__ __forceinline__ uint8_t f32_to_e2m1(float x) {
  const uint8_t sign = signbit(x) ? 8 : 0;
  const float a = isnan(x) ? 0.0f : fabsf(x);
  uint8_t best = 0;
  for (uint8_t c = 1; c < 8; ++c) {
    const float d_new = fabsf(fsub(a, e2m1_magnitude(c)));
    const float d_best = fabsf(fsub(a, e2m1_magnitude(best)));
    if (d_new < d_best || (d_new == d_best && (c & 1) == 0)) best = c;
  }
  return sign | best;
}

__host__ __device__ __forceinline__ float pow2_ceil(float x) {
  const uint32_t u = bits_of(x);
  const int exp = static_cast<int>((u >> 23) & 0xFF);
  const int bump = (u & 0x7FFFFF) != 0 ? 1 : 0;
  return ldexpf(1.0f, exp - 127 + bump);
}

__host__ __device__ __forceinline__ float clamp_like_std(float v, float lo,
                                                         float hi) {  // std::clamp: NaN stays NaN
  return v < lo ? lo : (hi < v ? hi : v);
}

// packed_formats.cpp exact_code: the element code of q, or -1 when q is not exactly one.
__host__ __device__ __forceinline__ int exact_code(bool fp8, float q) {
  if (!isfinite(q)) return -1;
  if (fp8) {
    if (fabsf(q) > 448.0f) return -1;
    const uint8_t c = f32_to_e4m3(q);
    const float back = e4m3_to_f32(c);
    return back == q && signbit(back) == signbit(q) ? c : -1;
  }
  if (fabsf(q) > 6.0f) return -1;
  const uint8_t c = f32_to_e2m1(q);
  const float back = e2m1_to_f32(c);
  return back == q && signbit(back) == signbit(q) ? c : -1;
}

// kv_quant.cpp (fake_quant_*) and packed_formats.cpp (pack_pow2_block, pack_e4m3_block), lane-
// parallel: one thread per element, the G = 16 or 32 lanes of a
// quantisation block form an aligned group of a warp (dim % G == 0 and blocks of 128 threads, so
// groups never straddle warps or rows). Block maxima are shuffle reductions: max and fmax are
// order-independent for non-NaN operands and both drop NaN, so they equal the serial loops. A
// serial try_codes stops at the first element that fails, leaving codes[i] of earlier attempts in
// place; first_fail reproduces that per lane from a ballot. One thread per block (the first
// version) spent ~40 us per 512-wide row on the H200: 32 dependent quantisations per thread.

// max over the group of G lanes, with the (a < b ? b : a) of std::max.
template <int G>
__device__ __forceinline__ float group_max(float m) {
#pragma unroll
  for (int o = G / 2; o >= 1; o >>= 1) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, m, o);
    m = m < other ? other : m;
  }
  return m;
}

// Index in the group of the first lane whose `pass` is false (G when all pass).
template <int G>
__device__ __forceinline__ int first_fail(bool pass, int lane) {
  const unsigned all = __ballot_sync(0xFFFFFFFFu, pass);
  const unsigned group = G == 32 ? all : (all >> (lane & ~(G - 1))) & ((1u << G) - 1u);
  const unsigned fails = ~group & (G == 32 ? 0xFFFFFFFFu : ((1u << G) - 1u));
  return fails == 0 ? G : __ffs(fails) - 1;
}

// One element of try_codes(fp8, x, n, s, codes): whether it passes and its code.
__device__ __forceinline__ bool try_code(bool fp8, float v, float s, uint8_t* code) {
  const int c = exact_code(fp8, fdiv(v, s));
  if (c < 0) return false;
  const float d = fp8 ? e4m3_to_f32(static_cast<uint8_t>(c)) : e2m1_to_f32(static_cast<uint8_t>(c));
  const float back = fmul(d, s);
  if (back != v || signbit(back) != signbit(v)) return false;
  *code = static_cast<uint8_t>(c);
  return true;
}

// The fake-quantised value of element x of its block (fake_quant_block, lane-parallel).
template <int G>
__device__ __forceinline__ float fake_quant_lane(KvFormat f, float x) {
  const float a = fabsf(x);
  const float amax_raw = group_max<G>(0.0f < a ? a : 0.0f);  // amax_std_max
  if (f == KvFormat::kWindowFp8) {
    const float amax = amax_raw < 1e-4f ? 1e-4f : amax_raw;
    const float s = pow2_ceil(fmul(amax, static_cast<float>(1.0 / 448.0)));
    return fmul(round_e4m3(clamp_like_std(fdiv(x, s), -448.0f, 448.0f)), s);
  }
  float s;
  if (f == KvFormat::kCompressedFp4) {
    const float floor_amax = 6.0f * ldexpf(1.0f, -9);
    const float amax = amax_raw < floor_amax ? floor_amax : amax_raw;
    s = round_e4m3(fdiv(amax, 6.0f));
  } else {
    const float floor_amax = 6.0f * ldexpf(1.0f, -126);
    const float amax = amax_raw < floor_amax ? floor_amax : amax_raw;
    s = pow2_ceil(fmul(amax, static_cast<float>(1.0 / 6.0)));
  }
  return fmul(e2m1_to_f32(f32_to_e2m1(clamp_like_std(fdiv(x, s), -6.0f, 6.0f))), s);
}

// Code and scale of element v of its block (pack_pow2_block / pack_e4m3_block, lane-parallel);
// the scale is the same in every lane of the group, 0xFF where the block cannot be packed.
template <int G>
__device__ __forceinline__ void pack_lane(KvFormat f, float v, int lane, uint8_t* code,
                                          uint8_t* scale) {
  const int k = lane & (G - 1);
  float amax = fmaxf(0.0f, fabsf(v));  // amax_fmax
#pragma unroll
  for (int o = G / 2; o >= 1; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  *code = 0;
  if (f != KvFormat::kCompressedFp4) {
    const bool fp8 = f == KvFormat::kWindowFp8;
    const float max_code = fp8 ? 448.0f : 6.0f;
    int e = 0;
    if (amax > 0.0f) {
      e = ilogbf(fdiv(amax, max_code));
      while (ldexpf(max_code, e) < amax) ++e;
      while (e > -127 && ldexpf(max_code, e - 1) >= amax) --e;
    }
    const bool in_range = e >= -127 && e <= 127;
    uint8_t c = 0;
    const bool pass = in_range && try_code(fp8, v, ldexpf(1.0f, in_range ? e : 0), &c);
    const int fail = first_fail<G>(pass, lane);
    if (in_range && k < fail) *code = c;
    *scale = in_range && fail == G ? static_cast<uint8_t>(e + 127) : 0xFF;
    return;
  }
  // pack_e4m3_block: attempts amax/6, amax/4, ... (k = 7 .. 1), or only 1.0 for an all-zero
  // block; every lane runs every attempt so the ballots see the whole warp.
  bool done = false;
  *scale = 0xFF;
  for (int m = 7; m >= 1; --m) {
    float s;
    uint8_t sc;
    bool valid;
    if (amax == 0.0f) {
      s = 1.0f;
      sc = f32_to_e4m3(1.0f);
      valid = m == 7;
    } else {
      s = fdiv(amax, e2m1_magnitude(m));
      sc = f32_to_e4m3(s);
      valid = s > 0.0f && e4m3_to_f32(sc) == s;
    }
    uint8_t c = 0;
    const bool pass = valid && try_code(false, v, valid ? s : 1.0f, &c);
    const int fail = first_fail<G>(pass, lane);
    if (valid && !done) {
      if (k < fail) *code = c;
      if (fail == G) {
        *scale = sc;
        done = true;
      }
    }
  }
}

// Element `col` of a row: its fake-quantised value to *xq (when non-null) and its code / the
// block's scale byte into the packed row(s) out and out2 (either may be null). Every lane of the
// warp calls it (the groups shuffle); `live` is false for the lanes past the data.
template <int G>
__device__ __forceinline__ void quantize_element(KvFormat f, float x, bool live, float* xq,
                                                 uint8_t* out, uint8_t* out2, int64_t col,
                                                 int64_t dim) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const float v = fake_quant_lane<G>(f, live ? x : 0.0f);
  if (live && xq != nullptr) *xq = v;
  if (out == nullptr && out2 == nullptr) return;  // uniform: the same for every thread
  uint8_t code, scale;
  pack_lane<G>(f, v, lane, &code, &scale);
  const uint8_t high = static_cast<uint8_t>(__shfl_down_sync(0xFFFFFFFFu, code, 1));
  if (!live) return;
  const bool fp8 = f == KvFormat::kWindowFp8;
  const int64_t at = fp8 ? col : col / 2, scale_at = (fp8 ? dim : dim / 2) + col / G;
  const bool writes_code = fp8 || (col & 1) == 0;
  const uint8_t byte = fp8 ? code : static_cast<uint8_t>(code | (high << 4));
  const bool writes_scale = (lane & (G - 1)) == 0;
  for (uint8_t* o : {out, out2}) {
    if (o == nullptr) continue;
    if (writes_code) o[at] = byte;
    if (writes_scale) o[scale_at] = scale;
  }
}

template <int G>
__global__ void __launch_bounds__(kThreads)
    kv_quantize_kernel(KvFormat f, const float* x, float* xq, uint8_t* packed, int64_t n,
                       int64_t dim, int64_t row_bytes) {
  detail::pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i - (threadIdx.x & 31) >= n) return;  // whole warps only: the groups shuffle
  const bool live = i < n;                  // the rest of a warp past n is whole dead groups
  const int64_t row = live ? i / dim : 0, col = live ? i % dim : 0;
  quantize_element<G>(f, live ? x[i] : 0.0f, live, xq != nullptr ? xq + i : nullptr,
                      packed != nullptr ? packed + row * row_bytes : nullptr, nullptr, col, dim);
}

// kv_norm_rope_quantize: one block of kNormThreads per row, the row staged in shared memory.
constexpr int kNormThreads = detail::kRmsNormThreads;  // rms_norm_kernel's fp64 sum tree
constexpr int kMaxRowDim = 2048;

template <int G>
__global__ void __launch_bounds__(kNormThreads)
    kv_row_kernel(KvFormat f, const float* x, KvRowOps ops, float* xq, uint8_t* packed, int64_t dim,
                  int64_t row_bytes) {
  detail::pdl_begin();
  __shared__ float buf[kMaxRowDim];
  __shared__ double partial[kNormThreads / 32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * dim;
  // RMSNorm (norm/rms_norm.cuh: the same per-thread stride and reduction as rms_norm_kernel).
  double ss = 0.0;
  for (int i = threadIdx.x; i < dim; i += kNormThreads) {
    const float v = xr[i];
    buf[i] = v;
    const double d = v;
    ss += d * d;
  }
  if (ops.norm_w != nullptr) {
    const float inv = detail::rms_inverse_block<kNormThreads>(ss, dim, ops.eps, partial);
    for (int i = threadIdx.x; i < dim; i += kNormThreads)
      buf[i] = __fmul_rn(__fmul_rn(buf[i], inv), ops.norm_w[i]);
  }
  // RoPE of the trailing rope_dim channels (rope.cuh), then the quantisation of every element.
  const int64_t pos = ops.pos0 + (row / ops.rows_per_position) * ops.pos_step;
  if (ops.inv_freq != nullptr) {
    __syncthreads();
    const int64_t r0 = dim - ops.rope_dim;
    for (int p = threadIdx.x; p < ops.rope_dim / 2; p += kNormThreads)
      detail::rope_pair(buf[r0 + 2 * p], buf[r0 + 2 * p + 1], ops.inv_freq[p], pos, false);
  }
  __syncthreads();
  uint8_t* out = packed != nullptr ? packed + row * row_bytes : nullptr;
  uint8_t* out2 = ops.ring != nullptr ? ops.ring + (pos % ops.ring_capacity) * row_bytes : nullptr;
  for (int base = 0; base < dim; base += kNormThreads) {  // dim % 32 == 0: whole warps
    const int i = base + static_cast<int>(threadIdx.x);
    if (i - static_cast<int>(threadIdx.x & 31) >= dim) break;
    quantize_element<G>(f, buf[i], true, xq != nullptr ? xq + row * dim + i : nullptr, out, out2, i,
                        dim);
  }
}

bool known_format(KvFormat f) {
  return f == KvFormat::kWindowFp8 || f == KvFormat::kCompressedFp4 || f == KvFormat::kIndexFp4;
}

}  // namespace

int kv_block_size(KvFormat f) { return f == KvFormat::kCompressedFp4 ? 16 : 32; }

int64_t kv_packed_bytes(KvFormat f, int64_t dim) {
  if (!known_format(f)) return -1;
  const int block = kv_block_size(f);
  if (dim <= 0 || dim % block != 0) return -1;
  return (f == KvFormat::kWindowFp8 ? dim : dim / 2) + dim / block;
}

cudaError_t kv_quantize(KvFormat f, const float* x, float* xq, uint8_t* packed, int64_t rows,
                        int64_t dim, cudaStream_t stream) {
  if (!known_format(f) || x == nullptr || rows < 0) return cudaErrorInvalidValue;
  const int64_t row_bytes = kv_packed_bytes(f, dim);
  if (row_bytes < 0) return cudaErrorInvalidValue;
  const int block = kv_block_size(f);
  if (rows > (int64_t{0x7FFFFFFF} * kThreads) / dim) return cudaErrorInvalidValue;
  if (rows == 0 || (xq == nullptr && packed == nullptr)) return cudaSuccess;
  const int64_t n = rows * dim;
  const unsigned grid = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  if (block == 16) {
    (void)detail::launch_kernel(kv_quantize_kernel<16>, grid, kThreads, 0, stream, f, x, xq, packed,
                                n, dim, row_bytes);
  } else {
    (void)detail::launch_kernel(kv_quantize_kernel<32>, grid, kThreads, 0, stream, f, x, xq, packed,
                                n, dim, row_bytes);
  }
  return cudaGetLastError();
}

cudaError_t kv_norm_rope_quantize(KvFormat f, const float* x, const KvRowOps& ops, float* xq,
                                  uint8_t* packed, int64_t rows, int64_t dim, cudaStream_t stream) {
  if (!known_format(f) || x == nullptr || rows < 0 || rows > 0x7FFFFFFF || dim % 32 != 0 ||
      dim > kMaxRowDim || ops.rows_per_position < 1 || ops.pos0 < 0 || ops.pos_step < 0 ||
      (ops.inv_freq != nullptr &&
       (ops.rope_dim < 2 || ops.rope_dim % 2 != 0 || ops.rope_dim > dim)) ||
      (ops.ring != nullptr && ops.ring_capacity < 1))
    return cudaErrorInvalidValue;
  const int64_t row_bytes = kv_packed_bytes(f, dim);
  if (row_bytes < 0) return cudaErrorInvalidValue;
  if (rows == 0 || (xq == nullptr && packed == nullptr && ops.ring == nullptr)) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  if (kv_block_size(f) == 16) {
    (void)detail::launch_kernel(kv_row_kernel<16>, grid, kNormThreads, 0, stream, f, x, ops, xq,
                                packed, dim, row_bytes);
  } else {
    (void)detail::launch_kernel(kv_row_kernel<32>, grid, kNormThreads, 0, stream, f, x, ops, xq,
                                packed, dim, row_bytes);
  }
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
