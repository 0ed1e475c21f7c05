// Builders of small synthetic EXL3 files for the rejection and bank tests (write_safetensors).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "loader/safetensors.hpp"
#include "quant/dtype.hpp"

namespace dsv41::test {

// A temp directory removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("dsv41_exl3_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string str(const std::string& rel = "") const { return (path / rel).string(); }
};

// Owns the bytes of tensors until written.
struct TensorSet {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<TensorToWrite> tensors;

  void add(const std::string& name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes) {
    storage.push_back(std::move(bytes));
    tensors.push_back({name, dtype, std::move(shape), {}});
  }
  void remove(const std::string& name) {
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].name == name) {
        tensors.erase(tensors.begin() + i);
        storage.erase(storage.begin() + i);
        return;
      }
  }
  void write(const std::string& path) {
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].bytes = storage[i];
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    write_safetensors(path, tensors);
  }
};

inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// fp16 values ±(0.5 .. 1.5) as bytes.
inline std::vector<uint8_t> f16_scales(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f, 1.5f);
  std::vector<uint8_t> b(2 * n);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_f16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

inline std::vector<uint8_t> i32_scalar(int32_t v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

constexpr int32_t kMul1Marker = static_cast<int32_t>(0x83DCD12Du);

// `<prefix>.{trellis, suh, svh, mul1}` for a (k, n) matrix at K bits.
inline void add_exl3(TensorSet& set, const std::string& prefix, int64_t k, int64_t n, int K,
                     uint32_t seed, bool mul1 = true) {
  set.add(prefix + ".trellis", DType::kI16, {k / 16, n / 16, 16 * K},
          random_bytes(static_cast<size_t>(k / 16 * n / 16 * 16 * K * 2), seed));
  set.add(prefix + ".suh", DType::kF16, {k}, f16_scales(k, seed + 1));
  set.add(prefix + ".svh", DType::kF16, {n}, f16_scales(n, seed + 2));
  if (mul1) set.add(prefix + ".mul1", DType::kI32, {}, i32_scalar(kMul1Marker));
}

// All three projections of one expert (hidden -> inter -> hidden).
inline void add_expert(TensorSet& set, int layer, int expert, int64_t hidden, int64_t inter, int K,
                       uint32_t seed) {
  const std::string p =
      "layers." + std::to_string(layer) + ".ffn.experts." + std::to_string(expert) + ".";
  add_exl3(set, p + "w1", hidden, inter, K, seed);
  add_exl3(set, p + "w3", hidden, inter, K, seed + 10);
  add_exl3(set, p + "w2", inter, hidden, K, seed + 20);
}

}  // namespace dsv41::test
