// Inputs of the whole-model CUDA benches: comma-separated size lists from the command line and
// random token ids (the synthetic checkpoints' weights are random, so any ids exercise the same
// work).
#pragma once

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dsv41::bench {

// "1,2,6" -> {1, 2, 6}; std::stoll throws std::invalid_argument on a non-number (guarded_main
// prints it).
inline std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

// n ids uniform in [3, vocab): ids 0-2 left out, as every bench drew them.
inline std::vector<int32_t> random_ids(std::mt19937& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> d(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(n);
  for (auto& x : ids) x = d(rng);
  return ids;
}

}  // namespace dsv41::bench
