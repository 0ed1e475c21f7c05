// Access to one tiny-model golden case (tests/fixtures/golden/<case>/): the
// model loaded through Transformer::load and the oracle tensors of
// golden.safetensors as fp32 / int vectors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/safetensors.hpp"
#include "model/transformer.hpp"

namespace dsv41::test {

class GoldenCase {
 public:
  explicit GoldenCase(const std::string& name);  // "tiny8" or "tiny40"

  const std::string& dir() const { return dir_; }
  Transformer& model() { return *model_; }
  bool has(const std::string& tensor) const;
  std::vector<float> f32(const std::string& tensor) const;
  std::vector<int32_t> i32(const std::string& tensor) const;  // I32/U8 tensors
  std::vector<int64_t> shape(const std::string& tensor) const;

 private:
  std::string dir_;
  std::unique_ptr<SafetensorsFile> file_;
  std::unique_ptr<Transformer> model_;
};

// max |a - b| over n elements (inf where exactly one side is non-finite).
double max_abs_diff(const float* a, const float* b, size_t n);
// Index of the largest element of row [n].
int argmax(const float* row, int64_t n);

}  // namespace dsv41::test
