// Shared set-up of the C ABI tests: tiny8 loaded through dsv41_model_load, and a status check
// that prints the library's message on failure.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "dsv41/dsv41.h"
#include "support/fixtures.hpp"

namespace dsv41::test {

inline std::string last_error() { return dsv41_last_error_message(); }

// tiny8 on the CPU backend with one thread; freed with the fixture.
struct CapiModel {
  CapiModel() {
    const std::string dir = fixture("golden/tiny8");
    dsv41_model_params p = dsv41_model_default_params();
    p.model_dir = dir.c_str();
    p.threads = 1;
    const dsv41_status st = dsv41_model_load(&p, &model);
    INFO(last_error());
    REQUIRE(st == DSV41_OK);
  }
  ~CapiModel() { dsv41_model_free(model); }
  CapiModel(const CapiModel&) = delete;
  CapiModel& operator=(const CapiModel&) = delete;
  dsv41_model* model = nullptr;
};

// st must be `want` and the message must contain `needle`.
inline void require_status(dsv41_status st, dsv41_status want, const std::string& needle) {
  INFO("status " << dsv41_status_name(st) << " (want " << dsv41_status_name(want)
                 << "), message: " << last_error());
  REQUIRE(st == want);
  REQUIRE(last_error().find(needle) != std::string::npos);
}

}  // namespace dsv41::test
