// dsv41_make_synthetic DIR --layers N --experts E [--tiny] [--seed S] [--shard-gib G]
// Writes a random-weight checkpoint in the released format (synthetic_checkpoint.hpp) and prints
// the byte total and the wall time. --tiny ignores --layers / --experts (the CPU-test geometry).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "synthetic/synthetic_checkpoint.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: dsv41_make_synthetic DIR --layers N --experts E [--tiny] [--seed S] "
               "[--shard-gib G]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int layers = 40, experts = 32;
  bool tiny = false;
  uint64_t seed = 1;
  double shard_gib = 0.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--layers" && has_value) {
      layers = std::atoi(argv[++i]);
    } else if (a == "--experts" && has_value) {
      experts = std::atoi(argv[++i]);
    } else if (a == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--shard-gib" && has_value) {
      shard_gib = std::atof(argv[++i]);
    } else if (a == "--tiny") {
      tiny = true;
    } else if (!a.empty() && a[0] != '-' && dir.empty()) {
      dir = a;
    } else {
      return usage();
    }
  }
  if (dir.empty()) return usage();
  try {
    using dsv41::synth::SyntheticGeometry;
    SyntheticGeometry g =
        tiny ? SyntheticGeometry::tiny() : SyntheticGeometry::released(layers, experts);
    if (shard_gib > 0) g.shard_bytes = static_cast<uint64_t>(shard_gib * (1ull << 30));
    const uint64_t bytes = dsv41::synth::synthetic_data_bytes(g);
    std::printf("writing %s: %d layers, %d experts, %.3f GB of tensor data\n", dir.c_str(),
                g.num_hidden_layers, g.n_routed_experts, bytes / 1e9);
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    dsv41::synth::write_synthetic_checkpoint(dir, g, seed);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("total_bytes %llu seconds %.2f GB/s %.2f\n", static_cast<unsigned long long>(bytes),
                s, bytes / 1e9 / s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv41_make_synthetic: %s\n", e.what());
    return 1;
  }
  return 0;
}
