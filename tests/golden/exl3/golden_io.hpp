// Reading the EXL3 oracle files: tensors by name as fp32 / raw fp16 bits, and the manifest.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loader/safetensors.hpp"
#include "support/fixtures.hpp"

namespace dsv41::test {

inline std::string exl3_fixture(const std::string& rel) { return fixture("golden/exl3/" + rel); }

inline TensorView tensor(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find_info(name);
  INFO(f.path() << ": tensor " << name);
  REQUIRE(info != nullptr);
  return f.view(*info);
}

inline std::vector<float> f32_of(const SafetensorsFile& f, const std::string& name) {
  return tensor_to_f32(tensor(f, name));
}

inline std::vector<uint16_t> u16_of(const SafetensorsFile& f, const std::string& name) {
  const TensorView t = tensor(f, name);
  REQUIRE(t.dtype() == DType::kF16);
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.data, t.nbytes());
  return out;
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

}  // namespace dsv41::test

namespace dsv41::test {

// Every |got - want| <= ulps · 2^-23 · |want| (fp32 relative ulps); prints the worst element.
inline void require_rel_ulps(const std::string& what, const std::vector<float>& got,
                             const std::vector<float>& want, double ulps) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = ulps * std::ldexp(std::fabs(static_cast<double>(want[i])), -23);
    const double ratio = d == 0 ? 0 : (allowed == 0 ? INFINITY : d / allowed);
    if (ratio > worst) {
      worst = ratio;
      at = i;
    }
  }
  INFO(what << ": worst element " << at << " got " << got[at] << " want " << want[at]
            << " (error/allowed = " << worst << ")");
  REQUIRE(worst <= 1.0);
}

}  // namespace dsv41::test
