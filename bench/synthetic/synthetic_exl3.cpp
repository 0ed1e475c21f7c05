// SyntheticExl3: K mix, bank tensor lists and plan (synthetic_exl3.hpp).
#include "synthetic/synthetic_exl3.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/check.hpp"
#include "exl3/codebook.hpp"
#include "synthetic/value_table.hpp"

namespace dsv41::synth {
namespace {

constexpr std::array<int, 3> kTrellisK = {2, 3, 5};  // the Spark mix (spec §4.1)
// The MUL1 codebook marker (spec exl3-format.md §2.2): 0x83DCD12D as an int32.
constexpr double kMul1Marker = -2082680531.0;
static_assert(static_cast<int64_t>(kMul1Marker) + (int64_t{1} << 32) == 0x83DCD12Dll);

int64_t pad128(int64_t x) { return (x + 127) / 128 * 128; }

double mul1_rms() {
  static const double rms = [] {
    const float* lut = exl3::codebook_lut_f32(exl3::Codebook::kMul1);
    double s = 0.0;
    for (int i = 0; i < 65536; ++i) s += double(lut[i]) * lut[i];
    return std::sqrt(s / 65536.0);
  }();
  return rms;
}

void add_matrix(std::vector<SyntheticTensor>* out, const std::string& prefix, int64_t in,
                int64_t outf, int K) {
  const int64_t k = pad128(in), n = pad128(outf);
  out->push_back(
      {prefix + ".trellis", DType::kI16, {k / 16, n / 16, 16 * int64_t{K}}, Fill::kBits, 0.0, 0.0});
  out->push_back({prefix + ".suh", DType::kF16, {k}, Fill::kSign, 1.0, 0.0});
  out->push_back({prefix + ".svh", DType::kF16, {n}, Fill::kSign, exl3_svh_scale(in), 0.0});
  out->push_back({prefix + ".mul1", DType::kI32, {}, Fill::kConst, kMul1Marker, 0.0});
}

}  // namespace

void SyntheticExl3::validate() const {
  DSV41_CHECK(mean_bpw >= 2.0 && mean_bpw <= 5.0, kInvalidArgument,
              "SyntheticExl3.mean_bpw = {} is outside [2, 5] (K is 2, 3 or 5)", mean_bpw);
  DSV41_CHECK(k5_fraction >= 0.0 && k5_fraction <= 1.0, kInvalidArgument,
              "SyntheticExl3.k5_fraction = {} is outside [0, 1]", k5_fraction);
}

std::array<int, 3> exl3_k_counts(int n_experts, const SyntheticExl3& x) {
  x.validate();
  DSV41_CHECK(n_experts >= 1, kInvalidArgument, "EXL3 K mix needs >= 1 expert (got {})", n_experts);
  const int least = n_experts >= 3 ? 1 : 0;
  const double want_bits = x.mean_bpw * n_experts, want5 = x.k5_fraction * n_experts;
  std::array<int, 3> best{};
  double best_d = 1e300, best_d5 = 1e300;
  for (int n5 = least; n5 <= n_experts; ++n5) {
    for (int n3 = least; n3 + n5 <= n_experts - least; ++n3) {
      const int n2 = n_experts - n3 - n5;
      const double d = std::fabs(2.0 * n2 + 3.0 * n3 + 5.0 * n5 - want_bits);
      const double d5 = std::fabs(n5 - want5);
      // Integer bit totals: equal distances are exactly equal doubles.
      if (d < best_d || (d == best_d && d5 < best_d5)) {
        best = {n2, n3, n5};
        best_d = d;
        best_d5 = d5;
      }
    }
  }
  return best;
}

std::vector<int> exl3_expert_k(const SyntheticGeometry& g, const SyntheticExl3& x, int layer) {
  const std::array<int, 3> n = exl3_k_counts(g.n_routed_experts, x);
  std::vector<int> k;
  for (int i = 0; i < 3; ++i) k.insert(k.end(), n[i], kTrellisK[i]);
  uint64_t s = 0x243F6A8885A308D3ull ^ (static_cast<uint64_t>(layer) * 0x9E3779B97F4A7C15ull);
  for (size_t i = k.size(); i > 1; --i) std::swap(k[i - 1], k[splitmix64(&s) % i]);
  return k;
}

double exl3_mean_bpw(const SyntheticGeometry& g, const SyntheticExl3& x) {
  const std::array<int, 3> n = exl3_k_counts(g.n_routed_experts, x);
  return (2.0 * n[0] + 3.0 * n[1] + 5.0 * n[2]) / g.n_routed_experts;
}

double exl3_svh_scale(int64_t in_features) {
  return 1.0 / (std::sqrt(static_cast<double>(in_features)) * mul1_rms());
}

std::vector<BankFile> exl3_bank_files(const SyntheticGeometry& g, const SyntheticExl3& x) {
  const int64_t D = g.hidden_size, I = g.moe_intermediate_size;
  std::vector<BankFile> files;
  for (int l = 0; l < g.num_hidden_layers; ++l) {
    const std::vector<int> k = exl3_expert_k(g, x, l);
    for (int K : kTrellisK) {
      BankFile f{fmt::format("exl3/qn/K{}/L{:02d}.safetensors", K, l), {}};
      for (int e = 0; e < g.n_routed_experts; ++e) {
        if (k[e] != K) continue;
        const std::string p = fmt::format("layers.{}.ffn.experts.{}.", l, e);
        add_matrix(&f.tensors, p + "w1", D, I, K);
        add_matrix(&f.tensors, p + "w3", D, I, K);
        add_matrix(&f.tensors, p + "w2", I, D, K);
      }
      if (!f.tensors.empty()) files.push_back(std::move(f));
    }
  }
  return files;
}

uint64_t exl3_bank_bytes(const SyntheticGeometry& g, const SyntheticExl3& x) {
  uint64_t n = 0;
  for (const BankFile& f : exl3_bank_files(g, x))
    for (const SyntheticTensor& t : f.tensors) n += t.nbytes();
  return n;
}

std::string exl3_plan_json(const SyntheticGeometry& g, const SyntheticExl3& x) {
  std::string layers, states;
  for (int l = 0; l < g.num_hidden_layers; ++l) {
    const std::vector<int> k = exl3_expert_k(g, x, l);
    int common = kTrellisK[0];
    for (int K : kTrellisK)  // ties go to the smaller K
      if (std::count(k.begin(), k.end(), K) > std::count(k.begin(), k.end(), common)) common = K;
    layers += fmt::format("{}\"{}\": \"K{}\"", l ? ", " : "", l, common);
    std::string over;
    for (size_t e = 0; e < k.size(); ++e)
      if (k[e] != common)
        over += fmt::format("{}\"{}\": \"K{}\"", over.empty() ? "" : ", ", e, k[e]);
    if (!over.empty())
      states += fmt::format("{}\n    \"{}\": {{{}}}", states.empty() ? "" : ",", l, over);
  }
  return fmt::format(
      "{{\n  \"layers\": {{{}}},\n  \"expert_state\": {{{}\n  }},\n  \"qdir\": \"qn\"\n}}\n",
      layers, states);
}

}  // namespace dsv41::synth
