// `dsv41 exl3-decode`: one EXL3 tensor -> Ŵ (F16) and W (F32), both [k, n] = (in, out).
// `dsv41 exl3-plan`: the Spark allocation plan resolved against the banks (docs/formats/exl3.md).
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>

#include "cli_args.hpp"
#include "core/check.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/expert_bank.hpp"
#include "plan_report.hpp"

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

// The plan file: --plan (a name under exl3/plan or a path), else the only *.json there.
std::string find_plan(const cli::Args& args, const std::string& model) {
  const std::optional<std::string> plan = find_plan_file(model, args.get("plan").value_or(""));
  DSV41_CHECK(plan.has_value(), kNotFound, "{}: no exl3/plan directory (pass --plan FILE)", model);
  return *plan;
}

int run_plan(const cli::Args& args) {
  args.allow({"model", "plan", "experts", "world"});
  const std::string model = args.require("model");
  ExpertBank::Options opt;
  opt.n_experts = static_cast<int>(args.get_int("experts", 384));
  const int world = static_cast<int>(args.get_int("world", 1));
  auto bank = ExpertBank::open(model, AllocationPlan::load(find_plan(args, model)), opt);
  cli::print_plan_report(*bank, world);
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
