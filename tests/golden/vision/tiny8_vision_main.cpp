// dsv41_tiny8_vision: writes the tiny8 checkpoint with the tiny vision tower of vision_fixture.hpp
// into a fresh temp directory and prints the directory (for script tests, e.g.
// tests/tp/tp_netns_test.py; the caller removes it). tiny8's greedy decoding is robust to the
// ~1e-3 logit differences of a TP split, which a random synthetic checkpoint's is not.
#include <cstdio>
#include <exception>

#include "vision_fixture.hpp"

int main() {
  try {
    std::printf("%s\n", dsv41::test::make_tiny8_vision().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv41_tiny8_vision: %s\n", e.what());
    return 1;
  }
}
