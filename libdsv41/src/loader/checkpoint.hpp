// A checkpoint directory: `model.safetensors.index.json` + shards (released layout), or a single
// `model.safetensors`. Every tensor is a zero-copy view into an mmapped shard.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader/safetensors.hpp"

namespace dsv41 {

struct DTypeInventory {
  size_t count = 0;
  uint64_t bytes = 0;
};

class Checkpoint {
 public:
  // Throws detail::Failure naming the directory / index / shard / tensor: missing index and
  // model.safetensors, a shard named by the index that is missing or corrupt, an index entry
  // whose tensor is not in its shard, a tensor present in two shards.
  static std::unique_ptr<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const { return by_name_.count(name) != 0; }
  std::optional<TensorView> find(const std::string& name) const;
  // Throws kNotFound "tensor 'X' not found in checkpoint DIR".
  TensorView get(const std::string& name) const;
  // get() plus dtype and shape check; the error names the file, the tensor, expected vs found.
  TensorView expect(const std::string& name, DType dtype, const std::vector<int64_t>& shape) const;
  // get() plus shape check, any of the given dtypes.
  TensorView expect_any(const std::string& name, const std::vector<DType>& dtypes,
                        const std::vector<int64_t>& shape) const;

  std::vector<std::string> names() const;  // sorted
  std::map<DType, DTypeInventory> inventory() const;
  size_t shard_count() const { return shards_.size(); }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, TensorView> by_name_;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[2304, 5120]"

}  // namespace dsv41
