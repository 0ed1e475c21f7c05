#include "golden_case.hpp"

#include <cmath>

#include "support/fixtures.hpp"

namespace dsv41::test {

GoldenCase::GoldenCase(const std::string& name) : dir_(fixture("golden/" + name)) {
  file_ = SafetensorsFile::open(dir_ + "/golden.safetensors");
  model_ = Transformer::load(dir_, 0);
}

bool GoldenCase::has(const std::string& tensor) const {
  return file_->find_info(tensor) != nullptr;
}

std::vector<float> GoldenCase::f32(const std::string& tensor) const {
  const TensorInfo* info = file_->find_info(tensor);
  if (!info) throw std::runtime_error("golden tensor missing: " + tensor);
  return tensor_to_f32(file_->view(*info));
}

std::vector<int32_t> GoldenCase::i32(const std::string& tensor) const {
  std::vector<float> v = f32(tensor);
  return std::vector<int32_t>(v.begin(), v.end());
}

std::vector<int64_t> GoldenCase::shape(const std::string& tensor) const {
  const TensorInfo* info = file_->find_info(tensor);
  if (!info) throw std::runtime_error("golden tensor missing: " + tensor);
  return info->shape;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (a[i] == b[i]) continue;  // equal infinities included
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

int argmax(const float* row, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = static_cast<int>(i);
  return best;
}

}  // namespace dsv41::test
