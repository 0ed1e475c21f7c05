// Writes the tiny EXL3-expert model and its dense twin (tiny_exl3_model.hpp) for the CLI test:
// make_tiny_exl3_model OUT_DIR -> OUT_DIR/exl3_model, OUT_DIR/dense_twin.
#include <cstdio>
#include <exception>

#include "tiny_exl3_model.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_tiny_exl3_model OUT_DIR\n");
    return 2;
  }
  try {
    dsv41::test::TinyExl3Model model(false, argv[1]);
    std::printf("%s\n%s\n", model.exl3_dir.c_str(), model.dense_dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_tiny_exl3_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
