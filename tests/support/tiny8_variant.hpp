// Building blocks of test checkpoints derived from the tiny8 oracle model (the DSpark and vision
// fixtures): a fresh temp directory with tiny8's tokenizer and shards linked in, and an index that
// also maps an extra shard's tensors.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/safetensors.hpp"
#include "support/fixtures.hpp"

namespace dsv41::test {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A new, empty directory <temp>/dsv41-<tag>-<pid>-<n> with tiny8's tokenizer.json and both shards
// linked in (the caller writes config.json and the index).
inline std::filesystem::path tiny8_variant_dir(const std::string& tag) {
  namespace fs = std::filesystem;
  static int counter = 0;
  const fs::path src = fixture("golden/tiny8");
  const fs::path dir =
      fs::temp_directory_path() /
      ("dsv41-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f :
       {"tokenizer.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
    fs::create_symlink(src / f, dir / f);
  return dir;
}

// Writes dir/model.safetensors.index.json: tiny8's index plus every tensor of `tensors` mapped to
// the shard file `shard` (already written in dir).
inline void write_index_with(const std::filesystem::path& dir, const std::string& shard,
                             const std::vector<TensorToWrite>& tensors) {
  std::string index =
      read_text(std::filesystem::path(fixture("golden/tiny8")) / "model.safetensors.index.json");
  std::string entries;
  for (const TensorToWrite& t : tensors) entries += "\n    \"" + t.name + "\": \"" + shard + "\",";
  const std::string key = "\"weight_map\": {";
  const size_t at = index.find(key);
  if (at == std::string::npos) throw std::runtime_error("tiny8 index: no weight_map");
  index.insert(at + key.size(), entries);
  std::ofstream(dir / "model.safetensors.index.json") << index;
}

}  // namespace dsv41::test
