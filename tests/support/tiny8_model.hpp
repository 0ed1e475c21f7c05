// The tiny8 oracle model, loaded once per test binary through the public API (the backend the
// environment selects: DSV41_BACKEND, cpu by default).
#pragma once

#include <catch2/catch.hpp>
#include <utility>

#include "dsv41/model.hpp"
#include "support/fixtures.hpp"

namespace dsv41::test {

inline const Model& tiny8_model() {
  static Model m = [] {
    ModelParams p;
    p.model_dir = fixture("golden/tiny8");
    auto r = Model::load(p);
    if (!r.is_ok()) FAIL(r.status().to_string());
    return std::move(r).value();
  }();
  return m;
}

}  // namespace dsv41::test
