// Checkpoint directories: the released multi-shard index, and named errors for broken layouts.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/check.hpp"
#include "loader/checkpoint.hpp"
#include "support/fixtures.hpp"
#include "temp_dir.hpp"

using namespace dsv41;
using dsv41::test::fixture;
using dsv41::test::TempDir;

namespace {
std::string open_error(const std::string& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const detail::Failure& f) {
    return f.message();
  }
  return "";
}

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
}  // namespace

TEST_CASE("checkpoint: tiny8 loads through its two-shard index", "[unit][loader]") {
  auto ck = Checkpoint::open(fixture("golden/tiny8"));
  REQUIRE(ck->shard_count() == 2);
  REQUIRE(ck->names().size() == 561);
  REQUIRE(ck->has("embed.weight"));
  REQUIRE(ck->has("head.weight"));
  TensorView e = ck->expect("embed.weight", DType::kBF16, {600, 96});
  REQUIRE(e.nbytes() == 600 * 96 * 2);
  auto inv = ck->inventory();
  size_t total = 0;
  for (const auto& [d, v] : inv) total += v.count;
  REQUIRE(total == 561);
  REQUIRE(inv.at(DType::kF8E4M3).count > 0);
  REQUIRE_THROWS_WITH(ck->get("layers.99.attn.wq_a.weight"),
                      Catch::Contains("layers.99.attn.wq_a.weight") && Catch::Contains("not found"));
  REQUIRE_THROWS_WITH(ck->expect("embed.weight", DType::kBF16, {600, 95}),
                      Catch::Contains("model-00001-of-00002.safetensors") &&
                          Catch::Contains("expected BF16 [600, 95], found BF16 [600, 96]"));
  REQUIRE_THROWS_WITH(ck->expect("embed.weight", DType::kF32, {600, 96}),
                      Catch::Contains("expected F32"));
}

TEST_CASE("checkpoint: broken directory layouts give named errors", "[unit][loader]") {
  TempDir dir;
  CHECK_THAT(open_error(dir.file("absent")), Catch::Contains("does not exist"));
  CHECK_THAT(open_error(dir.path()), Catch::Contains("neither model.safetensors.index.json"));

  auto a = f32_bytes({1, 2});
  write_safetensors(dir.file("s1.safetensors"), {{"a", DType::kF32, {2}, a}});
  dir.write("model.safetensors.index.json",
            R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  CHECK_THAT(open_error(dir.path()), Catch::Contains("s2.safetensors") &&
                                         Catch::Contains("is missing"));

  write_safetensors(dir.file("s2.safetensors"), {{"c", DType::kF32, {2}, a}});
  CHECK_THAT(open_error(dir.path()), Catch::Contains("'b'") &&
                                         Catch::Contains("does not contain it"));

  dir.write("model.safetensors.index.json", R"({"weight_map":{"a":"../s1.safetensors"}})");
  CHECK_THAT(open_error(dir.path()), Catch::Contains("not a file in the model directory"));
  dir.write("model.safetensors.index.json", R"({"weight_map":[1]})");
  CHECK_THAT(open_error(dir.path()), Catch::Contains("weight_map"));
  dir.write("model.safetensors.index.json", "{");
  CHECK_THAT(open_error(dir.path()), Catch::Contains("not valid JSON"));

  dir.write("model.safetensors.index.json",
            R"({"weight_map":{"a":"s1.safetensors","c":"s2.safetensors"}})");
  auto ck = Checkpoint::open(dir.path());
  REQUIRE(ck->names() == std::vector<std::string>{"a", "c"});

  // A corrupt shard names the shard.
  dir.write("s2.safetensors", "garbage");
  CHECK_THAT(open_error(dir.path()), Catch::Contains("s2.safetensors") &&
                                         Catch::Contains("truncated"));
}

TEST_CASE("checkpoint: a single model.safetensors without an index", "[unit][loader]") {
  TempDir dir;
  auto a = f32_bytes({1, 2, 3});
  write_safetensors(dir.file("model.safetensors"), {{"x", DType::kF32, {3}, a}});
  auto ck = Checkpoint::open(dir.path());
  REQUIRE(tensor_to_f32(ck->get("x")) == std::vector<float>{1, 2, 3});
}
