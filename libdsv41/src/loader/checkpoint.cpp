// Checkpoint: shard index resolution and tensor lookup with named errors.
#include "loader/checkpoint.hpp"

#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>

#include "core/check.hpp"

namespace dsv41 {

namespace {
bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& dir_in) {
  auto ck = std::unique_ptr<Checkpoint>(new Checkpoint());
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  ck->dir_ = dir;
  struct stat st {};
  DSV41_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), kNotFound,
              "model directory {} does not exist", dir);
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> shard_names;
  if (file_exists(index_path)) {
    simdjson::dom::parser parser;
    simdjson::padded_string json;
    DSV41_CHECK(!simdjson::padded_string::load(index_path).get(json), kIo, "{}: cannot read",
                index_path);
    simdjson::dom::element root;
    auto err = parser.parse(json).get(root);
    DSV41_CHECK(!err, kCorruptFile, "{}: not valid JSON: {}", index_path,
                simdjson::error_message(err));
    simdjson::dom::object wm;
    DSV41_CHECK(!root["weight_map"].get_object().get(wm), kCorruptFile,
                "{}: missing object 'weight_map'", index_path);
    for (auto f : wm) {
      std::string_view shard;
      DSV41_CHECK(!f.value.get_string().get(shard), kCorruptFile,
                  "{}: weight_map['{}'] is not a string", index_path, std::string(f.key));
      std::string s(shard);
      DSV41_CHECK(s.find('/') == std::string::npos && s != ".." && !s.empty(), kCorruptFile,
                  "{}: weight_map['{}'] names '{}', not a file in the model directory",
                  index_path, std::string(f.key), s);
      weight_map[std::string(f.key)] = s;
      if (std::find(shard_names.begin(), shard_names.end(), s) == shard_names.end())
        shard_names.push_back(s);
    }
    std::sort(shard_names.begin(), shard_names.end());
    for (const auto& s : shard_names)
      DSV41_CHECK(file_exists(dir + "/" + s), kNotFound, "shard {}/{} (named by {}) is missing",
                  dir, s, index_path);
  } else if (file_exists(dir + "/model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    DSV41_FAIL(kNotFound, "{}: neither model.safetensors.index.json nor model.safetensors found",
               dir);
  }

  for (const auto& s : shard_names) {
    ck->shards_.push_back(SafetensorsFile::open(dir + "/" + s));
    const SafetensorsFile& f = *ck->shards_.back();
    for (const auto& info : f.header().tensors) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(info.name);
        // Tensors a shard holds but the index does not name are not part of the model.
        if (it == weight_map.end() || it->second != s) continue;
      }
      DSV41_CHECK(ck->by_name_.emplace(info.name, f.view(info)).second, kCorruptFile,
                  "tensor '{}' appears twice ({} and an earlier shard)", info.name, f.path());
    }
  }
  for (const auto& [name, shard] : weight_map)
    DSV41_CHECK(ck->by_name_.count(name), kCorruptFile,
                "{}: tensor '{}' is mapped to shard {} but that shard does not contain it",
                index_path, name, shard);
  return ck;
}

std::optional<TensorView> Checkpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

TensorView Checkpoint::get(const std::string& name) const {
  auto it = by_name_.find(name);
  DSV41_CHECK(it != by_name_.end(), kNotFound, "tensor '{}' not found in checkpoint {}", name,
              dir_);
  return it->second;
}

TensorView Checkpoint::expect(const std::string& name, DType dtype,
                              const std::vector<int64_t>& shape) const {
  return expect_any(name, {dtype}, shape);
}

TensorView Checkpoint::expect_any(const std::string& name, const std::vector<DType>& dtypes,
                                  const std::vector<int64_t>& shape) const {
  TensorView t = get(name);
  bool dtype_ok = std::find(dtypes.begin(), dtypes.end(), t.dtype()) != dtypes.end();
  std::string want;
  for (DType d : dtypes) want += (want.empty() ? "" : "|") + std::string(dtype_name(d));
  DSV41_CHECK(dtype_ok && t.shape() == shape, kCorruptFile,
              "{}: tensor '{}': expected {} {}, found {} {}", *t.file, name, want,
              shape_string(shape), dtype_name(t.dtype()), shape_string(t.shape()));
  return t;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [n, v] : by_name_) out.push_back(n);
  return out;
}

std::map<DType, DTypeInventory> Checkpoint::inventory() const {
  std::map<DType, DTypeInventory> inv;
  for (const auto& [n, v] : by_name_) {
    inv[v.dtype()].count++;
    inv[v.dtype()].bytes += v.nbytes();
  }
  return inv;
}

}  // namespace dsv41
