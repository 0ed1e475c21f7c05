// The e2e tier's main: skipped (exit 77, with the reason) without DSV41_MODEL_DIR, else Catch2.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const char* dir = std::getenv("DSV41_MODEL_DIR");  // test harness input, not a tunable
  if (dir == nullptr || *dir == '\0') {
    std::printf("e2e: DSV41_MODEL_DIR is not set: skipped (point it at the released checkpoint)\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
