// Runs a libFuzzer target (linked in: tests/fuzz/fuzz_chat_*.cpp) on the chat goldens and on
// seeded mutations of them, so the fuzz entry points build and run in every unit test pass even
// without clang's -fsanitize=fuzzer.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "golden_cases.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> seed_inputs() {
  std::vector<std::string> out;
  for (const char* file : {"parse_cases.jsonl", "parse_reject_cases.jsonl", "stream_cases.jsonl"})
    for (const auto& row : dsv41::test::read_chat_golden(file))
      out.push_back(dsv41::test::str(row.root["raw_output"]));
  // Whole render cases are requests ({"messages", "tools", "options", ...}).
  for (const auto& row : dsv41::test::read_chat_golden("render_cases.jsonl"))
    out.push_back(simdjson::minify(row.root));
  return out;
}

int run(const std::string& input) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

}  // namespace

TEST_CASE("chat fuzz target " DSV41_FUZZ_TARGET ": golden inputs and seeded mutations",
          "[unit][chat]") {
  static const std::vector<std::string> kFragments = {"<｜DSML｜",
                                                      "</｜DSML｜",
                                                      " calls>",
                                                      " invoke name=\"",
                                                      " parameter name=\"a\" string=\"",
                                                      "true\">",
                                                      "false\">",
                                                      "</think>",
                                                      "<think>",
                                                      "<｜end▁of▁sentence｜>",
                                                      "\n\n",
                                                      ">",
                                                      "\"",
                                                      "｜",
                                                      "\xe4\xbc",
                                                      "{",
                                                      "}",
                                                      "[",
                                                      "]",
                                                      "null",
                                                      "\\u00"};
  std::mt19937_64 rng(12345);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const auto seeds = seed_inputs();
  REQUIRE(seeds.size() > 100);
  for (const auto& seed : seeds) {
    REQUIRE(run(seed) == 0);
    for (int m = 0; m < 40; ++m) {
      std::string s = seed;
      for (int edits = 1 + static_cast<int>(pick(4)); edits > 0; --edits) {
        const size_t pos = s.empty() ? 0 : pick(s.size() + 1);
        switch (pick(4)) {
          case 0:
            s.insert(pos, kFragments[pick(kFragments.size())]);
            break;
          case 1:
            if (pos < s.size()) s[pos] = static_cast<char>(rng());
            break;
          case 2:
            s.erase(pos, pick(32));
            break;
          default:
            s.resize(pos);
            break;
        }
      }
      REQUIRE(run(s) == 0);
    }
  }
}
