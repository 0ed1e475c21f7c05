// Paths of the test fixtures copied into the repo (tests/fixtures/, see tests/fixtures/README.md).
#pragma once

#include <string>

namespace dsv41::test {

inline std::string fixture(const std::string& relative) {
  return std::string(DSV41_FIXTURES_DIR) + "/" + relative;
}

}  // namespace dsv41::test
