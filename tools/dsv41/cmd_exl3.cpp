// `dsv41 exl3-decode`: one EXL3 tensor -> Ŵ (F16) and W (F32), both [k, n] = (in, out).
// `dsv41 exl3-plan`: the Spark allocation plan resolved against the banks (docs/formats/exl3.md).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <span>

#include "cli_args.hpp"
#include "core/check.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/expert_bank.hpp"

namespace {

using namespace dsv41;
using namespace dsv41::exl3;

int run_decode(const cli::Args& args) {
  args.allow({"file", "prefix", "out"});
  const std::string file = args.require("file"), prefix = args.require("prefix");
  const std::string out = args.require("out");
  auto f = SafetensorsFile::open(file);
  const Exl3Tensor t = load_exl3_tensor(*f, prefix);
  const std::vector<uint16_t> inner = decode_inner(t);
  const std::vector<float> weight = reconstruct_weight(t);
  const auto bytes = [](const auto& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                    v.size() * sizeof(v[0]));
  };
  write_safetensors(
      out,
      {{"inner", DType::kF16, {t.k, t.n}, bytes(inner)},
       {"weight", DType::kF32, {t.k, t.n}, bytes(weight)}},
      {{"source", file},
       {"prefix", prefix},
       {"K", std::to_string(t.K)},
       {"codebook", codebook_name(t.codebook)},
       {"orientation", "EXL3 (in, out): y = x @ weight; nn.Linear weight = weight.T"}});
  std::printf(
      "%s: K=%d codebook=%s k(in)=%lld n(out)=%lld -> %s (inner F16 [%lld, %lld], weight "
      "F32 [%lld, %lld])\n",
      prefix.c_str(), t.K, codebook_name(t.codebook), static_cast<long long>(t.k),
      static_cast<long long>(t.n), out.c_str(), static_cast<long long>(t.k),
      static_cast<long long>(t.n), static_cast<long long>(t.k), static_cast<long long>(t.n));
  return 0;
}

// The plan file: --plan, else the only *.json under <model>/exl3/plan/.
std::string find_plan(const cli::Args& args, const std::string& model) {
  if (auto p = args.get("plan")) return *p;
  const std::filesystem::path dir = std::filesystem::path(model) / "exl3" / "plan";
  DSV41_CHECK(std::filesystem::is_directory(dir), kNotFound,
              "{}: no exl3/plan directory (pass --plan FILE)", model);
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") found.push_back(e.path().string());
  DSV41_CHECK(found.size() == 1, kInvalidArgument,
              "{}: expected exactly one plan *.json, found {} (pass --plan FILE)", dir.string(),
              found.size());
  return found[0];
}

double gib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

int run_plan(const cli::Args& args) {
  args.allow({"model", "plan", "experts", "world"});
  const std::string model = args.require("model");
  ExpertBank::Options opt;
  opt.n_experts = static_cast<int>(args.get_int("experts", 384));
  const int world = static_cast<int>(args.get_int("world", 1));
  auto bank = ExpertBank::open(model, AllocationPlan::load(find_plan(args, model)), opt);
  const AllocationPlan& plan = bank->plan();
  std::printf("plan: %s\nbank roots (qdir order, first file holding an expert wins):\n",
              plan.path.c_str());
  for (const BankRoot& r : bank->roots())
    std::printf("  %-12s -> %s%s\n", r.entry.c_str(), r.path.c_str(),
                r.rerooted ? "  (absolute path absent: re-rooted under the model dir)" : "");
  std::printf("experts per layer %d, hidden %lld, inter %lld\n", opt.n_experts,
              static_cast<long long>(bank->hidden()), static_cast<long long>(bank->inter()));
  std::set<int> ks;
  for (const auto& [l, unused] : plan.layers)
    for (const auto& [k, experts] : bank->experts_by_k(l)) ks.insert(k);
  std::printf("layer");
  for (int k : ks) std::printf("   K%d", k);
  std::printf("  native        bytes    bpw\n");
  const double weights_per_expert = 3.0 * static_cast<double>(bank->hidden() * bank->inter());
  std::map<int, size_t> total_k;
  size_t total_native = 0, total_exl3 = 0;
  uint64_t total_bytes = 0;
  double trellis_bits = 0;
  for (const auto& [l, unused] : plan.layers) {
    const auto by_k = bank->experts_by_k(l);
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
        for (int e : by_k.at(k)) bytes += bank->find(l, e)->bytes();
    }
    const size_t native = static_cast<size_t>(opt.n_experts) - n;
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
    const ExpertRange range = expert_range(opt.n_experts, world, r);
    const uint64_t b = bank->bytes_in(range);
    std::printf("TP %d rank %d: experts [%d, %d), %llu bytes (%.3f GiB)\n", world, r, range.first,
                range.last, static_cast<unsigned long long>(b), gib(b));
  }
  return 0;
}

const cli::Registration reg_decode{
    {"exl3-decode", "--file F.safetensors --prefix P --out OUT.safetensors",
     "decode the EXL3 tensor at prefix P: writes inner (F16 [k, n], Hadamard domain) and weight "
     "(F32 [k, n], original basis), (in, out) orientation",
     &run_decode}};
const cli::Registration reg_plan{
    {"exl3-plan", "--model DIR [--plan FILE] [--experts 384] [--world 1]",
     "resolve the EXL3 expert plan against the banks: experts per K per layer, bytes, bpw, "
     "bytes per TP rank",
     &run_plan}};

}  // namespace
