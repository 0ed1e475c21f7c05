// One tiny oracle case (tests/fixtures/golden/<case>/, README there): config, checkpoint, the
// golden tensors as fp32, the oracle's layer roles, and comparisons whose failure messages name
// case, plan, layer, tensor and the worst element.
#pragma once

#include <simdjson.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "loader/checkpoint.hpp"
#include "loader/safetensors.hpp"
#include "support/fixtures.hpp"

namespace dsv41::test {

struct GoldenCase {
  std::string name;
  std::string dir;
  ModelConfig cfg;
  std::unique_ptr<Checkpoint> ck;
  std::unique_ptr<SafetensorsFile> golden;
  std::vector<std::string> oracle_roles;  // golden.json layer_roles[l].role

  explicit GoldenCase(const std::string& case_name)
      : name(case_name), dir(fixture("golden/" + case_name)) {
    auto loaded = ModelConfig::load(dir);
    INFO(loaded.status().message());
    REQUIRE(loaded.is_ok());
    cfg = std::move(loaded).value();
    ck = Checkpoint::open(dir);
    golden = SafetensorsFile::open(dir + "/golden.safetensors");
    std::ifstream in(dir + "/golden.json", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    simdjson::dom::parser parser;
    simdjson::dom::element root = parser.parse(simdjson::padded_string(ss.str()));
    for (simdjson::dom::element r : root["layer_roles"].get_array())
      oracle_roles.emplace_back(std::string_view(r["role"].get_string()));
  }

  bool has(const std::string& tensor) const { return golden->find_info(tensor) != nullptr; }
  // The tensor as fp32 (I32 / U8 convert exactly); `shape` receives its shape.
  std::vector<float> get(const std::string& tensor, std::vector<int64_t>* shape = nullptr) const {
    const TensorInfo* info = golden->find_info(tensor);
    INFO(name << ": golden tensor " << tensor);
    REQUIRE(info != nullptr);
    if (shape != nullptr) *shape = info->shape;
    return tensor_to_f32(golden->view(*info));
  }
};

// abs tolerance; ±inf must match exactly. The message names `what` and the worst [row, col].
inline void require_close_2d(const std::string& what, const std::vector<float>& got,
                             const std::vector<float>& want, int64_t cols, double tol) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  size_t at = 0, bad_inf = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    if (std::isinf(g) || std::isinf(w)) {
      if (g != w && bad_inf++ == 0) at = i;
      continue;
    }
    const double d = std::fabs(double{g} - w);
    if (!(d <= worst)) {  // also catches NaN
      worst = std::isnan(d) ? INFINITY : d;
      if (bad_inf == 0) at = i;
    }
  }
  std::ostringstream msg;
  msg << what << ": max |diff| " << worst << ", " << bad_inf << " infinity mismatches; worst ["
      << at / cols << ", " << at % cols << "] got " << got[at] << " want " << want[at]
      << " (tolerance " << tol << ")";
  INFO(msg.str());
  REQUIRE(bad_inf == 0);
  REQUIRE(worst <= tol);
}

// Exact equality; the message names the first differing [row, col].
template <typename A, typename B>
void require_equal_2d(const std::string& what, const A& got, const B& want, int64_t cols) {
  REQUIRE(got.size() == want.size());
  size_t n_bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (static_cast<double>(got[i]) != static_cast<double>(want[i]) && n_bad++ == 0) first = i;
  std::ostringstream msg;
  if (n_bad > 0)
    msg << what << ": " << n_bad << " of " << got.size() << " elements differ; first ["
        << first / cols << ", " << first % cols << "] got " << static_cast<double>(got[first])
        << " want " << static_cast<double>(want[first]);
  INFO(msg.str());
  REQUIRE(n_bad == 0);
}

}  // namespace dsv41::test
