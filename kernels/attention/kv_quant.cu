// KV fake-quantisation and packing (spec model-architecture.md §2.7, §2.8), bit for bit as the
// CPU reference: model/attention/kv_quant.cpp (the fake-quantisers), quant/dtype.cpp (e4m3 and
// e2m1 rounding, pow2_ceil) and kv/packed_formats.cpp (the canonical (code, scale) choice of
// pack()). Every step is an exact or correctly rounded fp32 operation (frexp/ldexp/rint, IEEE
// division, comparisons), mirrored statement by statement, so the results are identical.
// One thread per block of 16 or 32 values: it reads its block, writes its own values back (so
// xq may alias x) and its own packed bytes.
#include <cmath>
#include <cstring>

#include "dsv41k/attention.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxBlock = 32;

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

// kv_quant.cpp block_amax (std::max: a NaN never replaces m).
__host__ __device__ __forceinline__ float amax_std_max(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = fabsf(x[i]);
    m = m < a ? a : m;
  }
  return m;
}

// The fake-quantiser of the format, in place on one block (kv_quant.cpp).
__host__ __device__ __forceinline__ void fake_quant_block(KvFormat f, float* x, int n) {
  if (f == KvFormat::kWindowFp8) {
    const float inv_max = static_cast<float>(1.0 / 448.0);
    float amax = amax_std_max(x, n);
    amax = amax < 1e-4f ? 1e-4f : amax;
    const float s = pow2_ceil(fmul(amax, inv_max));
    for (int i = 0; i < n; ++i)
      x[i] = fmul(round_e4m3(clamp_like_std(fdiv(x[i], s), -448.0f, 448.0f)), s);
    return;
  }
  float s;
  if (f == KvFormat::kCompressedFp4) {
    const float floor_amax = 6.0f * ldexpf(1.0f, -9);
    float amax = amax_std_max(x, n);
    amax = amax < floor_amax ? floor_amax : amax;
    s = round_e4m3(fdiv(amax, 6.0f));
  } else {
    const float floor_amax = 6.0f * ldexpf(1.0f, -126);
    const float inv_max = static_cast<float>(1.0 / 6.0);
    float amax = amax_std_max(x, n);
    amax = amax < floor_amax ? floor_amax : amax;
    s = pow2_ceil(fmul(amax, inv_max));
  }
  for (int i = 0; i < n; ++i)
    x[i] = fmul(e2m1_to_f32(f32_to_e2m1(clamp_like_std(fdiv(x[i], s), -6.0f, 6.0f))), s);
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

__host__ __device__ __forceinline__ bool try_codes(bool fp8, const float* x, int n, float s,
                                                   uint8_t* codes) {
  for (int i = 0; i < n; ++i) {
    const int c = exact_code(fp8, fdiv(x[i], s));
    if (c < 0) return false;
    const float v =
        fp8 ? e4m3_to_f32(static_cast<uint8_t>(c)) : e2m1_to_f32(static_cast<uint8_t>(c));
    const float back = fmul(v, s);
    if (back != x[i] || signbit(back) != signbit(x[i])) return false;
    codes[i] = static_cast<uint8_t>(c);
  }
  return true;
}

// packed_formats.cpp block_amax (std::fmax).
__host__ __device__ __forceinline__ float amax_fmax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = fmaxf(m, fabsf(x[i]));
  return m;
}

// pack_pow2_block: the smallest power of two that keeps amax inside the element range.
__host__ __device__ __forceinline__ bool pack_pow2_block(bool fp8, const float* x, int n,
                                                         uint8_t* codes, uint8_t* scale) {
  const float amax = amax_fmax(x, n);
  const float max_code = fp8 ? 448.0f : 6.0f;
  int e = 0;
  if (amax > 0.0f) {
    e = ilogbf(fdiv(amax, max_code));
    while (ldexpf(max_code, e) < amax) ++e;
    while (e > -127 && ldexpf(max_code, e - 1) >= amax) --e;
  }
  if (e < -127 || e > 127) return false;
  *scale = static_cast<uint8_t>(e + 127);
  return try_codes(fp8, x, n, ldexpf(1.0f, e), codes);
}

// pack_e4m3_block: the first of amax/6, amax/4, ... that is an exact e4m3 scale of the block.
__host__ __device__ __forceinline__ bool pack_e4m3_block(const float* x, int n, uint8_t* codes,
                                                         uint8_t* scale) {
  const float amax = amax_fmax(x, n);
  if (amax == 0.0f) {
    *scale = f32_to_e4m3(1.0f);
    return try_codes(false, x, n, 1.0f, codes);
  }
  for (int k = 7; k >= 1; --k) {
    const float s = fdiv(amax, e2m1_magnitude(k));
    const uint8_t sc = f32_to_e4m3(s);
    if (!(s > 0.0f) || e4m3_to_f32(sc) != s) continue;
    if (try_codes(false, x, n, s, codes)) {
      *scale = sc;
      return true;
    }
  }
  return false;
}

// Block b of one row: src = x[row] [dim], xq_row = xq[row] or null, out = packed[row] or null.
__host__ __device__ __forceinline__ void quantize_block(KvFormat f, const float* src, float* xq_row,
                                                        uint8_t* out, int64_t b, int64_t dim,
                                                        int block) {
  float v[kMaxBlock];
  for (int k = 0; k < block; ++k) v[k] = src[b * block + k];
  fake_quant_block(f, v, block);
  if (xq_row != nullptr)
    for (int k = 0; k < block; ++k) xq_row[b * block + k] = v[k];
  if (out == nullptr) return;
  const bool fp8 = f == KvFormat::kWindowFp8;
  uint8_t* scale = out + (fp8 ? dim : dim / 2) + b;
  uint8_t codes[kMaxBlock] = {};
  const bool ok = f == KvFormat::kCompressedFp4 ? pack_e4m3_block(v, block, codes, scale)
                                                : pack_pow2_block(fp8, v, block, codes, scale);
  if (!ok) *scale = 0xFF;
  if (fp8) {
    for (int k = 0; k < block; ++k) out[b * block + k] = codes[k];
  } else {
    for (int k = 0; k < block; k += 2)
      out[(b * block + k) / 2] = static_cast<uint8_t>(codes[k] | (codes[k + 1] << 4));
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    kv_quantize_kernel(KvFormat f, const float* x, float* xq, uint8_t* packed, int64_t rows,
                       int64_t dim, int block, int64_t row_bytes) {
  const int64_t blocks_per_row = dim / block;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows * blocks_per_row) return;
  const int64_t row = i / blocks_per_row, b = i % blocks_per_row;
  quantize_block(f, x + row * dim, xq != nullptr ? xq + row * dim : nullptr,
                 packed != nullptr ? packed + row * row_bytes : nullptr, b, dim, block);
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
  const int64_t blocks_per_row = dim / block;
  if (rows > (int64_t{0x7FFFFFFF} * kThreads) / blocks_per_row) return cudaErrorInvalidValue;
  if (rows == 0 || (xq == nullptr && packed == nullptr)) return cudaSuccess;
  const int64_t n = rows * blocks_per_row;
  kv_quantize_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      f, x, xq, packed, rows, dim, block, row_bytes);
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
