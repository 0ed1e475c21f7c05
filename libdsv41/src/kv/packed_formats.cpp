// Exact pack/unpack of the §2.8 KV entry formats (see packed_formats.hpp for the layouts).
#include "kv/packed_formats.hpp"

#include <cmath>
#include <cstring>

#include "core/check.hpp"
#include "quant/dtype.hpp"

namespace dsv41::kv {
namespace {

constexpr float kE2m1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Element code of q for the format's element type, or -1 when q is not exactly representable.
int exact_code(bool fp8, float q) {
  if (!std::isfinite(q)) return -1;
  if (fp8) {
    if (std::fabs(q) > 448.0f) return -1;
    const uint8_t c = f32_to_e4m3(q);
    return e4m3_to_f32(c) == q && std::signbit(e4m3_to_f32(c)) == std::signbit(q) ? c : -1;
  }
  if (std::fabs(q) > 6.0f) return -1;
  const uint8_t c = f32_to_e2m1(q);
  return e2m1_to_f32(c) == q && std::signbit(e2m1_to_f32(c)) == std::signbit(q) ? c : -1;
}

float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

// Codes of x/s into codes[n]; false when some x[i]/s is not an exact code or x[i] != code·s.
bool try_codes(bool fp8, const float* x, int n, float s, uint8_t* codes) {
  for (int i = 0; i < n; ++i) {
    const float q = x[i] / s;
    const int c = exact_code(fp8, q);
    if (c < 0) return false;
    const float back = (fp8 ? e4m3_to_f32(static_cast<uint8_t>(c)) : e2m1_to_f32(c)) * s;
    if (back != x[i] || std::signbit(back) != std::signbit(x[i])) return false;
    codes[i] = static_cast<uint8_t>(c);
  }
  return true;
}

// ue8m0 block: the smallest power of two s with amax/s <= max code (keeps small values inside
// the element's range); all-zero blocks get 2^0.
bool pack_pow2_block(bool fp8, const float* x, int n, uint8_t* codes, uint8_t* scale) {
  const float amax = block_amax(x, n);
  const float max_code = fp8 ? 448.0f : 6.0f;
  int e = 0;
  if (amax > 0.0f) {
    e = std::ilogb(amax / max_code);  // floor(log2), then step up until amax/2^e fits
    while (std::ldexp(max_code, e) < amax) ++e;
    while (e > -127 && std::ldexp(max_code, e - 1) >= amax) --e;
  }
  if (e < -127 || e > 127) return false;
  *scale = static_cast<uint8_t>(e + 127);
  return try_codes(fp8, x, n, std::ldexp(1.0f, e), codes);
}

// e4m3-scaled FP4 block: the value of largest magnitude is c·s for one of the 7 nonzero codes;
// try them from the largest (the quantiser's usual amax/6) down, and take the first s that is
// an exact positive e4m3 value and represents the whole block.
bool pack_e4m3_block(const float* x, int n, uint8_t* codes, uint8_t* scale) {
  const float amax = block_amax(x, n);
  if (amax == 0.0f) {
    *scale = f32_to_e4m3(1.0f);
    return try_codes(false, x, n, 1.0f, codes);
  }
  for (int k = 7; k >= 1; --k) {
    const float s = amax / kE2m1Values[k];
    const uint8_t sc = f32_to_e4m3(s);
    if (!(s > 0.0f) || e4m3_to_f32(sc) != s) continue;
    if (try_codes(false, x, n, s, codes)) {
      *scale = sc;
      return true;
    }
  }
  return false;
}

void check_dim(EntryFormat f, int64_t dim) {
  DSV41_CHECK(dim > 0 && dim % block_size(f) == 0, kInvalidArgument,
              "{} entry: width {} is not a positive multiple of the block {}", entry_format_name(f),
              dim, block_size(f));
}

}  // namespace

const char* entry_format_name(EntryFormat f) {
  switch (f) {
    case EntryFormat::kWindowFp8:
      return "window FP8 e4m3/ue8m0";
    case EntryFormat::kCompressedFp4:
      return "compressed FP4 e2m1/e4m3";
    case EntryFormat::kIndexFp4:
      return "index-key FP4 e2m1/ue8m0";
  }
  return "?";
}

int block_size(EntryFormat f) { return f == EntryFormat::kCompressedFp4 ? 16 : 32; }

int64_t packed_bytes(EntryFormat f, int64_t dim) {
  const int64_t scales = dim / block_size(f);
  return (f == EntryFormat::kWindowFp8 ? dim : dim / 2) + scales;
}

void pack(EntryFormat f, const float* x, int64_t dim, uint8_t* out) {
  check_dim(f, dim);
  const int B = block_size(f);
  const bool fp8 = f == EntryFormat::kWindowFp8;
  const int64_t code_bytes = fp8 ? dim : dim / 2;
  uint8_t codes[32];
  for (int64_t b = 0; b < dim / B; ++b) {
    const float* xb = x + b * B;
    uint8_t* scale = out + code_bytes + b;
    const bool ok = f == EntryFormat::kCompressedFp4 ? pack_e4m3_block(xb, B, codes, scale)
                                                     : pack_pow2_block(fp8, xb, B, codes, scale);
    if (!ok) {
      int worst = 0;
      for (int i = 1; i < B; ++i)
        if (std::fabs(xb[i]) > std::fabs(xb[worst])) worst = i;
      DSV41_FAIL(kInternal,
                 "{} entry: block {} (values {}..{}) is not code x scale for any scale of the "
                 "format (largest |value| {} at {}); the value was not fake-quantised",
                 entry_format_name(f), b, b * B, b * B + B - 1, xb[worst], b * B + worst);
    }
    if (fp8) {
      std::memcpy(out + b * B, codes, B);
    } else {
      for (int i = 0; i < B; i += 2)
        out[(b * B + i) / 2] = static_cast<uint8_t>(codes[i] | (codes[i + 1] << 4));
    }
  }
}

void unpack(EntryFormat f, const uint8_t* in, int64_t dim, float* x) {
  check_dim(f, dim);
  const int B = block_size(f);
  const bool fp8 = f == EntryFormat::kWindowFp8;
  const int64_t code_bytes = fp8 ? dim : dim / 2;
  for (int64_t b = 0; b < dim / B; ++b) {
    const uint8_t sc = in[code_bytes + b];
    const float s =
        f == EntryFormat::kCompressedFp4 ? e4m3_to_f32(sc) : std::ldexp(1.0f, int{sc} - 127);
    for (int i = 0; i < B; ++i) {
      const int64_t k = b * B + i;
      const float v = fp8 ? e4m3_to_f32(in[k]) : e2m1_to_f32((in[k / 2] >> (4 * (k & 1))) & 0xF);
      x[k] = v * s;
    }
  }
}

}  // namespace dsv41::kv
