// dsv41_make_synthetic DIR --layers N --experts E [--router R] [--tiny] [--exl3] [--vision]
//                      [--engram] [--engram-primes P] [--dspark] [--seed S] [--shard-gib G]
//                      [--forward T] [--no-write]
// Writes a random-weight checkpoint in the released format (synthetic_checkpoint.hpp) and prints
// the byte total and the wall time. --exl3 writes the routed experts as EXL3 banks + plan (the
// Spark layout, K mix 2/3/5 at ~2.77 bpw) instead of FP4, and prints the bank bytes apart. --tiny
// ignores --layers / --experts (the CPU-test geometry). --vision adds a vision tower (released
// dims, or tiny ones with --tiny; spec §7) with vision_config. --engram adds Engram at layers 1
// and 14 (tiny: 2 and 5) with a generated tokenizer.json of the full vocabulary; --engram-primes
// P starts the bucket-prime search at P (default 65536: ~0.41 GB of table per layer; released
// 16,000,000, 101 GB per layer) (synthetic_engram.hpp). --router R (>= E; the release: 384)
// makes the router R wide over a stored pool of E experts: expert e runs expert e % E's weights
// (text_config.synthetic_expert_pool), top-min(6, R). --dspark adds the 3-stage DSpark module
// (mtp.*, spec §1.5: 128 routed experts top-3, with --router a pool of min(E, 128) stored).
// --forward T then loads DIR with the CPU Transformer (all cores) and runs a T-token prefill,
// printing the load / forward seconds and the logits' RMS, max |x| and non-finite count;
// --no-write only checks an existing DIR.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "synthetic/synthetic_checkpoint.hpp"
#include "synthetic/synthetic_engram.hpp"
#include "synthetic/synthetic_exl3.hpp"
#include "synthetic/synthetic_tokenizer.hpp"
#ifdef DSV41_SYNTH_WITH_MODEL
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"
#endif

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int check_forward(const std::string& dir, int tokens, bool dspark) {
#ifdef DSV41_SYNTH_WITH_MODEL
  auto t0 = std::chrono::steady_clock::now();
  auto m = dsv41::Transformer::load(dir, 0, nullptr, "", dspark);
  std::printf("load_seconds %.2f\n", seconds_since(t0));
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  const int64_t vocab = m->config().text.vocab_size;
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((7919 * (i + 3)) % vocab);
  dsv41::SequenceState st = m->new_sequence();
  t0 = std::chrono::steady_clock::now();
  const std::vector<float> logits = m->forward(st, ids);
  const double fs = seconds_since(t0);
  double sq = 0.0, mx = 0.0;
  size_t bad = 0;
  for (float x : logits) {
    if (!std::isfinite(x)) {
      ++bad;
      continue;
    }
    sq += double(x) * x;
    mx = std::max(mx, double(std::fabs(x)));
  }
  std::printf("forward_tokens %d seconds %.2f logits %zu rms %.4f max_abs %.4f non_finite %zu\n",
              tokens, fs, logits.size(), std::sqrt(sq / double(logits.size())), mx, bad);
  if (dspark) {  // one draft round after the prompt (the module binds and runs)
    const dsv41::DsparkProposal p = dsv41::DsparkDrafter(*m).draft(st, ids.back());
    std::printf("dspark_draft %s confidence %s\n",
                fmt::format("{}", fmt::join(p.tokens, " ")).c_str(),
                fmt::format("{:.3f}", fmt::join(p.confidence, " ")).c_str());
  }
  return bad == 0 && logits.size() == static_cast<size_t>(tokens * vocab) ? 0 : 1;
#else
  (void)dir;
  (void)tokens;
  (void)dspark;
  std::fprintf(stderr, "dsv41_make_synthetic: built without dsv41_model, --forward unavailable\n");
  return 2;
#endif
}

int usage() {
  std::fprintf(
      stderr,
      "usage: dsv41_make_synthetic DIR --layers N --experts E [--router R] [--tiny] [--exl3] "
      "[--vision] [--engram] [--engram-primes P] [--dspark] [--seed S] [--shard-gib G] "
      "[--forward T] "
      "[--no-write]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int layers = 40, experts = 32, router = 0;
  bool tiny = false;
  bool vision = false;
  bool engram = false;
  bool dspark = false;
  int64_t engram_primes = 65536;
  uint64_t seed = 1;
  double shard_gib = 0.0;
  int forward_tokens = 0;
  bool write = true;
  dsv41::synth::SyntheticExl3 exl3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--layers" && has_value) {
      layers = std::atoi(argv[++i]);
    } else if (a == "--experts" && has_value) {
      experts = std::atoi(argv[++i]);
    } else if (a == "--router" && has_value) {
      router = std::atoi(argv[++i]);
    } else if (a == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--shard-gib" && has_value) {
      shard_gib = std::atof(argv[++i]);
    } else if (a == "--forward" && has_value) {
      forward_tokens = std::atoi(argv[++i]);
    } else if (a == "--no-write") {
      write = false;
    } else if (a == "--exl3") {
      exl3.enabled = true;
    } else if (a == "--tiny") {
      tiny = true;
    } else if (a == "--vision") {
      vision = true;
    } else if (a == "--engram") {
      engram = true;
    } else if (a == "--dspark") {
      dspark = true;
    } else if (a == "--engram-primes" && has_value) {
      engram_primes = std::atoll(argv[++i]);
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
    if (vision)
      g.vision = tiny ? SyntheticGeometry::Vision::tiny() : SyntheticGeometry::Vision::released();
    if (shard_gib > 0) g.shard_bytes = static_cast<uint64_t>(shard_gib * (1ull << 30));
    if (router > 0) {
      if (router < g.n_routed_experts)
        throw std::runtime_error("--router " + std::to_string(router) + " is below the " +
                                 std::to_string(g.n_routed_experts) + " stored experts");
      g.expert_pool = g.n_routed_experts;
      g.n_routed_experts = router;
      if (!tiny) g.num_experts_per_tok = std::min(6, router);
    }
    if (dspark) {
      g.dspark_stages = 3;
      if (tiny) {  // the CUDA draft routes in the backbone's workspace: no more experts than it
        g.dspark_experts = g.n_routed_experts;
        g.dspark_top_k = std::min(2, g.n_routed_experts);
      }
    }
    std::string tokenizer_json;
    if (engram) {
      tokenizer_json = dsv41::synth::synthetic_tokenizer_json(
          read_text(DSV41_FIXTURES_DIR "/golden/tokenizer/tiny_tokenizer.json"), g.vocab_size);
      dsv41::synth::add_engram(&g, tokenizer_json, engram_primes);
      std::printf("Engram layers %zu, %.3f GB of tables, compressed vocabulary %lld\n",
                  g.engram.layer_ids.size(), dsv41::synth::engram_table_bytes(g) / 1e9,
                  static_cast<long long>(g.engram.compressed_vocab_size));
    }
    const uint64_t shard_bytes = dsv41::synth::synthetic_data_bytes(g, exl3);
    const uint64_t bank_bytes = exl3.enabled ? dsv41::synth::exl3_bank_bytes(g, exl3) : 0;
    const uint64_t bytes = shard_bytes + bank_bytes;
    std::printf("%s: %d layers, %d experts", dir.c_str(), g.num_hidden_layers, g.n_routed_experts);
    if (g.expert_pool > 0) std::printf(" (a pool of %d stored)", g.expert_pool);
    std::printf(", %.3f GB of shard data", shard_bytes / 1e9);
    if (exl3.enabled)
      std::printf(" + %.3f GB of EXL3 banks (mean %.4f bpw)", bank_bytes / 1e9,
                  dsv41::synth::exl3_mean_bpw(g, exl3));
    std::printf("\nshard_bytes %llu bank_bytes %llu\n",
                static_cast<unsigned long long>(shard_bytes),
                static_cast<unsigned long long>(bank_bytes));
    std::fflush(stdout);
    if (write) {
      const auto t0 = std::chrono::steady_clock::now();
      dsv41::synth::write_synthetic_checkpoint(dir, g, seed, exl3, tokenizer_json);
      const double s = seconds_since(t0);
      std::printf("total_bytes %llu seconds %.2f GB/s %.2f\n",
                  static_cast<unsigned long long>(bytes), s, bytes / 1e9 / s);
    }
    if (forward_tokens > 0) return check_forward(dir, forward_tokens, dspark);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv41_make_synthetic: %s\n", e.what());
    return 1;
  }
  return 0;
}
