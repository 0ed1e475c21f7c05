// Exact scalar format conversions (see dtype.hpp for the formats).
#include "quant/dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace dsv41 {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kBF16, "BF16", 2}, {DType::kF16, "F16", 2},         {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},   {DType::kI8, "I8", 1},           {DType::kI16, "I16", 2},
    {DType::kI32, "I32", 4},   {DType::kI64, "I64", 8},         {DType::kU8, "U8", 1},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E8M0, "F8_E8M0", 1},
};

inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
}  // namespace

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.type;
  return std::nullopt;
}

const char* dtype_name(DType t) { return kDTypes[static_cast<int>(t)].name; }
size_t dtype_size(DType t) { return kDTypes[static_cast<int>(t)].size; }

float bf16_to_f32(uint16_t bits) { return float_of(static_cast<uint32_t>(bits) << 16); }

uint16_t f32_to_bf16(float x) {
  uint32_t u = bits_of(x);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

uint16_t f32_to_f16(float x) {
  const uint32_t u = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (std::isnan(x)) return sign | 0x7E00;
  const float a = std::fabs(x);
  if (a >= 65520.0f) return sign | 0x7C00;  // rounds to inf
  if (a < std::ldexp(1.0f, -14)) {          // subnormal: quantum 2^-24
    const float q = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<uint16_t>(q);  // q == 1024 encodes the smallest normal, correctly
  }
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  const int exp = e - 1;  // a in [2^exp, 2^(exp+1))
  float m = std::nearbyint(std::ldexp(a, 10 - exp));  // in [1024, 2048]
  int biased = exp + 15;
  if (m >= 2048.0f) {
    m = 1024.0f;
    ++biased;
  }
  if (biased >= 31) return sign | 0x7C00;
  return sign | static_cast<uint16_t>((biased << 10) | (static_cast<uint32_t>(m) - 1024));
}

float e4m3_to_f32(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 7;
  if (exp == 15 && man == 7) return std::numeric_limits<float>::quiet_NaN();
  const float v = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                           : std::ldexp(static_cast<float>(8 + man), exp - 10);
  return sign ? -v : v;
}

uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7E;  // saturate (e4m3fn has no inf)
  int e;
  std::frexp(a, &e);
  int exp = e - 1;                 // a in [2^exp, 2^(exp+1))
  if (a == 0.0f || exp < -6) exp = -6;  // subnormal range shares the 2^-9 quantum
  const float q = std::nearbyint(std::ldexp(a, 3 - exp)) ;  // units of 2^(exp-3)
  float v = std::ldexp(q, exp - 3);
  if (v > 448.0f) v = 448.0f;
  if (v == 0.0f) return sign;
  std::frexp(v, &e);
  int ve = e - 1;
  if (ve < -6) return sign | static_cast<uint8_t>(std::ldexp(v, 9));  // subnormal code = v/2^-9
  const int man = static_cast<int>(std::ldexp(v, 3 - ve)) - 8;
  return sign | static_cast<uint8_t>(((ve + 7) << 3) | man);
}

float e8m0_to_f32(uint8_t b) {
  if (b == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(b) - 127);
}

float e2m1_to_f32(uint8_t code) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kMag[code & 7];
  return (code & 8) ? -v : v;
}

uint8_t f32_to_e2m1(float x) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const uint8_t sign = std::signbit(x) ? 8 : 0;
  const float a = std::isnan(x) ? 0.0f : std::fabs(x);
  uint8_t best = 0;
  for (uint8_t c = 1; c < 8; ++c) {
    const float d_new = std::fabs(a - kMag[c]), d_best = std::fabs(a - kMag[best]);
    if (d_new < d_best || (d_new == d_best && (c & 1) == 0)) best = c;
  }
  return sign | best;
}

float pow2_ceil(float x) {
  const uint32_t u = bits_of(x);
  const int exp = static_cast<int>((u >> 23) & 0xFF);
  const int bump = (u & 0x7FFFFF) != 0 ? 1 : 0;
  return std::ldexp(1.0f, exp - 127 + bump);
}

void dequant_fp8_blocked(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                         int64_t block_rows, int64_t block_cols, float* out) {
  const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* srow = scale + (r / block_rows) * scale_cols;
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = e4m3_to_f32(w[r * cols + c]) * e8m0_to_f32(srow[c / block_cols]);
  }
}

void dequant_fp4_rowblocked(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                            int64_t block, float* out) {
  const int64_t scale_cols = cols / block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t byte = w[r * (cols / 2) + c / 2];
      const uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xF);
      out[r * cols + c] = e2m1_to_f32(code) * e8m0_to_f32(scale[r * scale_cols + c / block]);
    }
  }
}

}  // namespace dsv41
