#include "synthetic/value_table.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "core/check.hpp"

namespace dsv41::synth {
namespace {

constexpr size_t kEntries = 65536;

// Standard-normal quantile of p by bisection on erfc (60 halvings of [-10, 10]: < 1e-16).
double normal_quantile(double p) {
  double lo = -10.0, hi = 10.0;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Quantiles of (u + 0.5) / n, u < n: |z| <= 4.17 at n = 65536, 2.88 at n = 256.
std::vector<double> quantiles(size_t n) {
  std::vector<double> z(n);
  for (size_t u = 0; u < n / 2; ++u) {
    z[u] = normal_quantile((static_cast<double>(u) + 0.5) / static_cast<double>(n));
    z[n - 1 - u] = -z[u];
  }
  return z;
}

const std::vector<double>& quantiles16() {
  static const std::vector<double> z = quantiles(kEntries);
  return z;
}

const std::vector<double>& quantiles8() {
  static const std::vector<double> z = quantiles(256);
  return z;
}

double rms_of(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

// Scales z by s, rounds with `decode_of` (value -> decoded value), and rescales s until the RMS of
// the decoded values is `want` (8 fixed-point steps). e2m1 has 8 magnitudes, so its RMS is a
// step function of s: within 1 % (0.25 % at code RMS 1.41); e4m3 / bf16 within 1e-3.
double calibrate(const std::vector<double>& z, double want,
                 const std::function<double(double)>& decode_of) {
  double s = want;
  std::vector<double> d(z.size());
  for (int it = 0; it < 8; ++it) {
    for (size_t i = 0; i < z.size(); ++i) d[i] = decode_of(s * z[i]);
    const double r = rms_of(d);
    if (r <= 0.0) break;
    s *= want / r;
  }
  return s;
}

template <typename T>
void put(std::vector<uint8_t>* table, size_t i, T v) {
  std::memcpy(table->data() + i * sizeof(T), &v, sizeof(T));
}

template <size_t kElem>
void fill_from(const uint8_t* table, uint8_t* dst, size_t count, uint64_t state) {
  size_t i = 0;
  while (i + 4 <= count) {
    const uint64_t r = splitmix64(&state);
    for (int k = 0; k < 4; ++k, ++i)
      std::memcpy(dst + i * kElem, table + ((r >> (16 * k)) & 0xFFFF) * kElem, kElem);
  }
  const uint64_t r = splitmix64(&state);
  for (int k = 0; i < count; ++k, ++i)
    std::memcpy(dst + i * kElem, table + ((r >> (16 * k)) & 0xFFFF) * kElem, kElem);
}

}  // namespace

ValueTable ValueTable::make(const SyntheticTensor& t) {
  ValueTable v;
  v.elem_ = dtype_size(t.dtype);
  const auto bad = [&] {
    DSV41_FAIL(kInvalidArgument, "synthetic tensor '{}': fill {} is not defined for dtype {}",
               t.name, static_cast<int>(t.fill), dtype_name(t.dtype));
  };
  const std::vector<double>& z = quantiles16();
  switch (t.fill) {
    case Fill::kConst:
      v.constant_ = true;
      v.table_.resize(v.elem_);
      if (t.dtype == DType::kBF16) {
        put(&v.table_, 0, f32_to_bf16(static_cast<float>(t.value)));
        v.rms_ = std::fabs(bf16_to_f32(f32_to_bf16(static_cast<float>(t.value))));
      } else if (t.dtype == DType::kF32) {
        put(&v.table_, 0, static_cast<float>(t.value));
        v.rms_ = std::fabs(t.value);
      } else if (t.dtype == DType::kI32) {
        DSV41_CHECK(t.value >= INT32_MIN && t.value <= INT32_MAX && t.value == std::trunc(t.value),
                    kInvalidArgument, "synthetic tensor '{}': {} is not an int32", t.name, t.value);
        put(&v.table_, 0, static_cast<int32_t>(t.value));
        v.rms_ = std::fabs(t.value);
      } else if (t.dtype == DType::kF8E8M0 || t.dtype == DType::kU8 || t.dtype == DType::kI8) {
        DSV41_CHECK(t.value >= 0 && t.value < 255, kInvalidArgument,
                    "synthetic tensor '{}': byte {} outside [0, 255) (0xFF is the E8M0 NaN)",
                    t.name, t.value);
        v.table_[0] = static_cast<uint8_t>(t.value);
        v.rms_ = t.dtype == DType::kF8E8M0 ? e8m0_to_f32(v.table_[0]) : t.value;
      } else {
        bad();
      }
      return v;
    case Fill::kNormal:
    case Fill::kUniform: {
      if (t.dtype != DType::kBF16 && t.dtype != DType::kF32) bad();
      const bool bf = t.dtype == DType::kBF16;
      const auto dec = [bf](double x) {
        return bf ? static_cast<double>(bf16_to_f32(f32_to_bf16(static_cast<float>(x))))
                  : static_cast<double>(static_cast<float>(x));
      };
      std::vector<double> x(kEntries);
      if (t.fill == Fill::kNormal) {
        const double s = calibrate(z, t.sigma, dec);
        for (size_t u = 0; u < kEntries; ++u) x[u] = dec(s * z[u]);
      } else {
        for (size_t u = 0; u < kEntries; ++u)
          x[u] = dec(t.value + t.sigma * (2.0 * (static_cast<double>(u) + 0.5) / kEntries - 1.0));
      }
      v.table_.resize(kEntries * v.elem_);
      for (size_t u = 0; u < kEntries; ++u) {
        if (bf)
          put(&v.table_, u, f32_to_bf16(static_cast<float>(x[u])));
        else
          put(&v.table_, u, static_cast<float>(x[u]));
      }
      v.rms_ = rms_of(x);
      return v;
    }
    case Fill::kE4m3Code: {
      if (t.dtype != DType::kF8E4M3) bad();
      const auto dec = [](double x) {
        return static_cast<double>(round_e4m3(static_cast<float>(x)));
      };
      const double s = calibrate(z, t.sigma, dec);
      v.table_.resize(kEntries);
      std::vector<double> x(kEntries);
      for (size_t u = 0; u < kEntries; ++u) {
        v.table_[u] = f32_to_e4m3(static_cast<float>(s * z[u]));
        DSV41_CHECK((v.table_[u] & 0x7F) != 0x7F, kInternal,
                    "synthetic tensor '{}': code std {} reaches the e4m3 NaN", t.name, s);
        x[u] = e4m3_to_f32(v.table_[u]);
      }
      v.rms_ = rms_of(x);
      return v;
    }
    case Fill::kE2m1Pair: {
      if (t.dtype != DType::kI8 && t.dtype != DType::kU8) bad();
      const std::vector<double>& z8 = quantiles8();
      const auto dec = [](double x) {
        return static_cast<double>(e2m1_to_f32(f32_to_e2m1(static_cast<float>(x))));
      };
      const double s = calibrate(z8, t.sigma, dec);
      uint8_t nib[256];
      std::vector<double> x(256);
      for (size_t u = 0; u < 256; ++u) {
        nib[u] = f32_to_e2m1(static_cast<float>(s * z8[u]));
        x[u] = e2m1_to_f32(nib[u]);
      }
      v.table_.resize(kEntries);
      for (size_t u = 0; u < kEntries; ++u)
        v.table_[u] = static_cast<uint8_t>(nib[u >> 8] | (nib[u & 0xFF] << 4));
      v.rms_ = rms_of(x);
      return v;
    }
    case Fill::kBits:
      v.bits_ = true;
      v.rms_ = 0.0;  // not a value distribution
      return v;
    case Fill::kSign: {
      // Entries [0, 32768) are +|x|, the rest -|x|: one random bit per element.
      std::vector<uint8_t> plus(v.elem_), minus(v.elem_);
      const float x = static_cast<float>(std::fabs(t.value));
      if (t.dtype == DType::kF16) {
        const uint16_t h = f32_to_f16(x);
        std::memcpy(plus.data(), &h, 2);
        v.rms_ = f16_to_f32(h);
      } else if (t.dtype == DType::kBF16) {
        const uint16_t h = f32_to_bf16(x);
        std::memcpy(plus.data(), &h, 2);
        v.rms_ = bf16_to_f32(h);
      } else if (t.dtype == DType::kF32) {
        std::memcpy(plus.data(), &x, 4);
        v.rms_ = x;
      } else {
        bad();
      }
      minus = plus;
      minus[v.elem_ - 1] ^= 0x80;  // the sign bit of the little-endian float
      v.table_.resize(kEntries * v.elem_);
      for (size_t u = 0; u < kEntries; ++u)
        std::memcpy(v.table_.data() + u * v.elem_, (u < kEntries / 2 ? plus : minus).data(),
                    v.elem_);
      return v;
    }
  }
  bad();
  return v;
}

void ValueTable::fill(uint8_t* dst, size_t n, uint64_t stream) const {
  DSV41_CHECK(n % elem_ == 0, kInternal, "ValueTable::fill: {} bytes is not a multiple of {}", n,
              elem_);
  const size_t count = n / elem_;
  if (bits_) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const uint64_t r = splitmix64(&stream);
      std::memcpy(dst + i, &r, 8);
    }
    if (i < n) {
      const uint64_t r = splitmix64(&stream);
      std::memcpy(dst + i, &r, n - i);
    }
    return;
  }
  if (constant_) {
    if (elem_ == 1) {
      std::memset(dst, table_[0], n);
    } else {
      for (size_t i = 0; i < count; ++i) std::memcpy(dst + i * elem_, table_.data(), elem_);
    }
    return;
  }
  switch (elem_) {
    case 1:
      fill_from<1>(table_.data(), dst, count, stream);
      break;
    case 2:
      fill_from<2>(table_.data(), dst, count, stream);
      break;
    case 4:
      fill_from<4>(table_.data(), dst, count, stream);
      break;
    default:
      DSV41_FAIL(kInternal, "ValueTable::fill: element size {}", elem_);
  }
}

}  // namespace dsv41::synth
