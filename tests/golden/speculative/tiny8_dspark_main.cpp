// dsv41_tiny8_dspark: writes the tiny8 checkpoint with the synthetic DSpark module of
// dspark_fixture.hpp into a fresh temp directory and prints the directory (for script tests,
// e.g. tests/tp/tp_netns_test.py; the caller removes it).
#include <cstdio>
#include <exception>

#include "dspark_fixture.hpp"

int main() {
  try {
    std::printf("%s\n", dsv41::test::make_tiny8_dspark().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv41_tiny8_dspark: %s\n", e.what());
    return 1;
  }
}
