// write_synthetic_checkpoint: lays the tensors out over shards (in file order, a new shard when
// the next tensor would pass shard_bytes), appends the EXL3 bank files when asked, and hands all
// of them to write_tensor_files at once, so the banks and the shards share the threads. Stream
// ids are the tensor's index in that list: the shards come first, so a release-format checkpoint
// is byte-identical to what the writer produced before the banks existed.
#include "synthetic/synthetic_checkpoint.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "core/check.hpp"
#include "synthetic/synthetic_exl3.hpp"
#include "synthetic/tensor_files.hpp"

namespace dsv41::synth {
namespace {

std::string shard_name(int i, int n) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
}

}  // namespace

void write_synthetic_checkpoint(const std::string& dir, const SyntheticGeometry& g, uint64_t seed,
                                const SyntheticExl3& exl3, const std::string& tokenizer_json) {
  exl3.validate();
  DSV41_CHECK(g.engram.layer_ids.empty() || !tokenizer_json.empty(), kInvalidArgument,
              "synthetic checkpoint {}: Engram layers need a tokenizer.json (tokenizer_json is "
              "empty)",
              dir);
  std::vector<SyntheticTensor> ts = synthetic_tensors(g, exl3);
  const size_t n_main = ts.size();
  std::vector<TensorFile> files(1);
  uint64_t in_shard = 0;
  for (size_t i = 0; i < n_main; ++i) {
    const uint64_t n = ts[i].nbytes();
    if (in_shard > 0 && in_shard + n > g.shard_bytes) {
      files.emplace_back();
      in_shard = 0;
    }
    files.back().tensors.push_back(i);
    in_shard += n;
  }
  const int n_shards = static_cast<int>(files.size());
  std::vector<std::string> shard_of(n_main);
  for (int s = 0; s < n_shards; ++s) {
    files[s].path = dir + "/" + shard_name(s, n_shards);
    for (size_t i : files[s].tensors) shard_of[i] = shard_name(s, n_shards);
  }

  const std::string plan = dir + "/exl3/plan/plan.json";
  std::error_code ec;
  if (exl3.enabled) {
    for (BankFile& b : exl3_bank_files(g, exl3)) {
      TensorFile f{dir + "/" + b.rel_path, {}};
      for (SyntheticTensor& t : b.tensors) {
        f.tensors.push_back(ts.size());
        ts.push_back(std::move(t));
      }
      std::filesystem::create_directories(std::filesystem::path(f.path).parent_path(), ec);
      DSV41_CHECK(!ec, kIo, "{}: cannot create the directory: {}", f.path, ec.message());
      files.push_back(std::move(f));
    }
  } else {
    std::filesystem::remove(plan, ec);  // an earlier --exl3 run's plan would make this Spark
  }
  std::filesystem::create_directories(dir, ec);
  DSV41_CHECK(!ec, kIo, "{}: cannot create the directory: {}", dir, ec.message());
  write_text_file(dir + "/config.json", synthetic_config_json(g));
  if (tokenizer_json.empty())
    std::filesystem::remove(dir + "/tokenizer.json", ec);  // an earlier --engram run's
  else
    write_text_file(dir + "/tokenizer.json", tokenizer_json);

  write_tensor_files(ts, files, seed);

  std::map<std::string, std::string> weight_map;
  uint64_t total = 0;
  for (size_t i = 0; i < n_main; ++i) {
    weight_map[ts[i].name] = shard_of[i];
    total += ts[i].nbytes();
  }
  std::string idx = fmt::format("{{\n  \"metadata\": {{\n    \"total_size\": {}\n  }},\n", total);
  idx += "  \"weight_map\": {";
  bool first = true;
  for (const auto& [name, file] : weight_map) {
    idx += fmt::format("{}\n    \"{}\": \"{}\"", first ? "" : ",", name, file);
    first = false;
  }
  idx += "\n  }\n}\n";
  write_text_file(dir + "/model.safetensors.index.json", idx);
  // Last: a directory with a plan loads as Spark, so the plan appears only once the banks exist.
  if (exl3.enabled) write_text_file(plan, exl3_plan_json(g, exl3));
}

}  // namespace dsv41::synth
