// EXL3 tensor validation: every rejection of exl3_tensor.hpp names the file and tensor; legacy
// su/sv, scalar-or-[1] markers, bias; the on-the-fly matmul against the dense reconstruction.
#include <catch2/catch.hpp>
#include <random>

#include "core/check.hpp"
#include "core/thread_pool.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/exl3_tensor.hpp"
#include "support/tolerance.hpp"
#include "synth_exl3.hpp"

using namespace dsv41;
using namespace dsv41::exl3;
using Catch::Matchers::Contains;

namespace {

// Writes `set` and loads prefix "m"; returns the error message ("" on success).
std::string load_error(test::TensorSet& set, const test::TempDir& dir) {
  const std::string path = dir.str("m.safetensors");
  set.write(path);
  auto f = SafetensorsFile::open(path);
  try {
    load_exl3_tensor(*f, "m");
  } catch (const detail::Failure& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("exl3 tensor: a valid set loads with K, dims, codebook", "[unit][exl3]") {
  test::TempDir dir;
  test::TensorSet set;
  test::add_exl3(set, "m", 256, 128, 3, 1);
  set.add("other.weight", DType::kF32, {2}, std::vector<uint8_t>(8));
  set.write(dir.str("m.safetensors"));
  auto f = SafetensorsFile::open(dir.str("m.safetensors"));
  const Exl3Tensor t = load_exl3_tensor(*f, "m");
  REQUIRE(t.K == 3);
  REQUIRE(t.k == 256);
  REQUIRE(t.n == 128);
  REQUIRE(t.codebook == Codebook::kMul1);
  REQUIRE(t.stored_bytes == 256 / 16 * 128 / 16 * 48 * 2 + 256 * 2 + 128 * 2 + 4);
}

TEST_CASE("exl3 tensor: rejections name the file and the tensor", "[unit][exl3]") {
  test::TempDir dir;
  const std::string file = dir.str("m.safetensors");
  test::TensorSet set;
  test::add_exl3(set, "m", 256, 128, 2, 1);

  SECTION("unknown suffix") {
    set.add("m.scale", DType::kF16, {1}, std::vector<uint8_t>(2));
    REQUIRE_THAT(load_error(set, dir), Contains(file) && Contains("unknown tensor 'm.scale'"));
  }
  SECTION("both markers") {
    set.add("m.mcg", DType::kI32, {}, test::i32_scalar(1));
    REQUIRE_THAT(load_error(set, dir), Contains("both codebook markers 'm.mcg' and 'm.mul1'"));
  }
  SECTION("marker not an I32 scalar") {
    set.remove("m.mul1");
    set.add("m.mul1", DType::kI32, {2}, std::vector<uint8_t>(8));
    REQUIRE_THAT(load_error(set, dir), Contains("'m.mul1': marker must be an I32 scalar"));
  }
  SECTION("K above 8") {
    set.remove("m.trellis");
    set.add("m.trellis", DType::kI16, {16, 8, 144}, std::vector<uint8_t>(16 * 8 * 144 * 2));
    REQUIRE_THAT(load_error(set, dir), Contains("'m.trellis': K = 9") && Contains("outside 1..8"));
  }
  SECTION("K of zero") {
    set.remove("m.trellis");
    set.add("m.trellis", DType::kI16, {16, 8, 0}, {});
    REQUIRE_THAT(load_error(set, dir), Contains("K = 0"));
  }
  SECTION("last dim not a multiple of 16") {
    set.remove("m.trellis");
    set.add("m.trellis", DType::kI16, {16, 8, 24}, std::vector<uint8_t>(16 * 8 * 24 * 2));
    REQUIRE_THAT(load_error(set, dir), Contains("last dim 24 is not a multiple of 16"));
  }
  SECTION("k not a multiple of 128") {
    set.remove("m.trellis");
    set.add("m.trellis", DType::kI16, {4, 8, 32}, std::vector<uint8_t>(4 * 8 * 32 * 2));
    REQUIRE_THAT(load_error(set, dir),
                 Contains("k = 64 and n = 128") && Contains("multiples of 128"));
  }
  SECTION("trellis of the wrong dtype") {
    set.remove("m.trellis");
    set.add("m.trellis", DType::kI32, {16, 8, 16}, std::vector<uint8_t>(16 * 8 * 16 * 4));
    REQUIRE_THAT(load_error(set, dir), Contains("'m.trellis': expected I16"));
  }
  SECTION("no trellis") {
    set.remove("m.trellis");
    REQUIRE_THAT(load_error(set, dir), Contains("no EXL3 tensor at prefix 'm' (no 'm.trellis')"));
  }
  SECTION("missing suh") {
    set.remove("m.suh");
    REQUIRE_THAT(load_error(set, dir), Contains("missing 'm.suh' (or legacy 'm.su')"));
  }
  SECTION("suh and legacy su together") {
    set.add("m.su", DType::kI16, {16}, std::vector<uint8_t>(32));
    REQUIRE_THAT(load_error(set, dir), Contains("both 'm.suh' and legacy 'm.su'"));
  }
  SECTION("svh of the wrong length") {
    set.remove("m.svh");
    set.add("m.svh", DType::kF16, {256}, std::vector<uint8_t>(512));
    REQUIRE_THAT(load_error(set, dir), Contains("'m.svh': expected F16 [128], found F16 [256]"));
  }
  SECTION("bias of the wrong length") {
    set.add("m.bias", DType::kF16, {3}, std::vector<uint8_t>(6));
    REQUIRE_THAT(load_error(set, dir), Contains("'m.bias': expected F16/F32 [128]"));
  }
}

TEST_CASE("exl3 tensor: legacy packed signs and a [1] marker", "[unit][exl3]") {
  test::TempDir dir;
  test::TensorSet set;
  set.add("m.trellis", DType::kI16, {8, 8, 16}, test::random_bytes(8 * 8 * 16 * 2, 5));
  // su word 0 = 0x0005: elements 0 and 2 are -1.
  std::vector<uint8_t> su(16, 0), sv(16, 0xFF);
  su[0] = 0x05;
  set.add("m.su", DType::kI16, {8}, su);
  set.add("m.sv", DType::kI16, {8}, sv);
  set.add("m.mcg", DType::kI32, {1}, test::i32_scalar(1));
  set.write(dir.str("m.safetensors"));
  auto f = SafetensorsFile::open(dir.str("m.safetensors"));
  const Exl3Tensor t = load_exl3_tensor(*f, "m");
  REQUIRE(t.codebook == Codebook::kMcg);
  std::vector<float> s(128);
  t.suh.to_f32(s.data());
  REQUIRE(s[0] == -1.0f);
  REQUIRE(s[1] == 1.0f);
  REQUIRE(s[2] == -1.0f);
  REQUIRE(s[3] == 1.0f);
  REQUIRE(s[127] == 1.0f);
  t.svh.to_f32(s.data());
  for (float v : s) REQUIRE(v == -1.0f);
}

TEST_CASE("exl3 matmul equals x · reconstructed W (+ bias) for every codebook", "[unit][exl3]") {
  for (int cb = 0; cb < 3; ++cb) {
    test::TempDir dir;
    test::TensorSet set;
    test::add_exl3(set, "m", 256, 384, 4, 11 + cb, /*mul1=*/cb == 2);
    if (cb == 1) set.add("m.mcg", DType::kI32, {}, test::i32_scalar(1));
    std::vector<uint8_t> bias(384 * 4);
    for (int i = 0; i < 384; ++i) {
      const float b = 0.25f * static_cast<float>(i % 7);
      std::memcpy(&bias[4 * i], &b, 4);
    }
    set.add("m.bias", DType::kF32, {384}, bias);
    set.write(dir.str("m.safetensors"));
    auto f = SafetensorsFile::open(dir.str("m.safetensors"));
    const Exl3Tensor t = load_exl3_tensor(*f, "m");
    REQUIRE(static_cast<int>(t.codebook) == cb);
    const std::vector<float> w = reconstruct_weight(t);
    std::mt19937 rng(cb);
    std::normal_distribution<float> normal;
    const size_t rows = 5;
    std::vector<float> x(rows * 256), y(rows * 384);
    for (float& v : x) v = normal(rng);
    ThreadPool pool(2);
    matmul(t, x.data(), rows, y.data(), &pool);
    std::vector<double> want(rows * 384);
    double ymax = 0;
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < 384; ++c) {
        double acc = 0.25 * static_cast<double>(c % 7);
        for (size_t i = 0; i < 256; ++i) acc += double(x[r * 256 + i]) * w[i * 384 + c];
        want[r * 384 + c] = acc;
        ymax = std::max(ymax, std::fabs(acc));
      }
    INFO("codebook " << codebook_name(t.codebook));
    test::require_close("y", y, want, y.size(), 3e-6 * ymax);
  }
}
