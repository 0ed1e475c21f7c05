// Plan report text (see plan_report.hpp; docs/formats/exl3.md).
#include "plan_report.hpp"

#include <cstdio>
#include <map>
#include <set>

namespace dsv41::cli {

using namespace dsv41::exl3;

namespace {
double gib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }
}  // namespace

void print_plan_report(const ExpertBank& bank, int world) {
  const AllocationPlan& plan = bank.plan();
  std::printf("plan: %s\nbank roots (qdir order, first file holding an expert wins):\n",
              plan.path.c_str());
  for (const BankRoot& r : bank.roots())
    std::printf("  %-12s -> %s%s\n", r.entry.c_str(), r.path.c_str(),
                r.rerooted ? "  (absolute path absent: re-rooted under the model dir)" : "");
  std::printf("experts per layer %d, hidden %lld, inter %lld\n", bank.n_experts(),
              static_cast<long long>(bank.hidden()), static_cast<long long>(bank.inter()));
  std::set<int> ks;
  for (const auto& [l, unused] : plan.layers)
    for (const auto& [k, experts] : bank.experts_by_k(l)) ks.insert(k);
  std::printf("layer");
  for (int k : ks) std::printf("   K%d", k);
  std::printf("  native        bytes    bpw\n");
  const double weights_per_expert = 3.0 * static_cast<double>(bank.hidden() * bank.inter());
  std::map<int, size_t> total_k;
  size_t total_native = 0, total_exl3 = 0;
  uint64_t total_bytes = 0;
  double trellis_bits = 0;
  for (const auto& [l, unused] : plan.layers) {
    const auto by_k = bank.experts_by_k(l);
    size_t n = 0;
    uint64_t bytes = 0;
    std::printf("%5d", l);
    for (int k : ks) {
      const size_t c = by_k.count(k) ? by_k.at(k).size() : 0;
      std::printf(" %4zu", c);
      total_k[k] += c;
      n += c;
      trellis_bits += static_cast<double>(c) * k;
      if (by_k.count(k))
        for (int e : by_k.at(k)) bytes += bank.find(l, e)->bytes();
    }
    const size_t native = static_cast<size_t>(bank.n_experts()) - n;
    std::printf(
        " %7zu %12llu %6.3f\n", native, static_cast<unsigned long long>(bytes),
        n ? 8.0 * static_cast<double>(bytes) / (static_cast<double>(n) * weights_per_expert) : 0.0);
    total_native += native;
    total_exl3 += n;
    total_bytes += bytes;
  }
  std::printf("total: %zu EXL3 experts (", total_exl3);
  for (int k : ks) std::printf("%sK%d %zu", k == *ks.begin() ? "" : ", ", k, total_k[k]);
  std::printf(
      "), %zu native (release FP4), %llu bytes (%.3f GiB), %.3f bpw stored "
      "(trellis + suh/svh), %.3f bpw trellis\n",
      total_native, static_cast<unsigned long long>(total_bytes), gib(total_bytes),
      total_exl3 ? 8.0 * static_cast<double>(total_bytes) /
                       (static_cast<double>(total_exl3) * weights_per_expert)
                 : 0.0,
      total_exl3 ? trellis_bits / static_cast<double>(total_exl3) : 0.0);
  for (int r = 0; r < world; ++r) {
    const ExpertRange range = expert_range(bank.n_experts(), world, r);
    const uint64_t b = bank.bytes_in(range);
    std::printf("TP %d rank %d: experts [%d, %d), %llu bytes (%.3f GiB)\n", world, r, range.first,
                range.last, static_cast<unsigned long long>(b), gib(b));
  }
}

}  // namespace dsv41::cli
