// pack/unpack of the §2.8 entry formats is lossless on fake-quantised values and rejects others.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/check.hpp"
#include "kv/packed_formats.hpp"
#include "model/attention/kv_quant.hpp"

namespace dsv41::kv {
namespace {

void fake_quant(EntryFormat f, std::vector<float>& x) {
  if (f == EntryFormat::kWindowFp8) fake_quant_window_fp8(x.data(), static_cast<int64_t>(x.size()));
  if (f == EntryFormat::kCompressedFp4)
    fake_quant_compressed_fp4(x.data(), static_cast<int64_t>(x.size()));
  if (f == EntryFormat::kIndexFp4) fake_quant_index_fp4(x.data(), static_cast<int64_t>(x.size()));
}

void require_roundtrip(EntryFormat f, const std::vector<float>& x) {
  const int64_t dim = static_cast<int64_t>(x.size());
  std::vector<uint8_t> packed(packed_bytes(f, dim), 0xAA);
  pack(f, x.data(), dim, packed.data());
  std::vector<float> back(dim, 12345.0f);
  unpack(f, packed.data(), dim, back.data());
  REQUIRE(std::memcmp(back.data(), x.data(), dim * sizeof(float)) == 0);  // bits, -0 included
}

constexpr EntryFormat kFormats[] = {EntryFormat::kWindowFp8, EntryFormat::kCompressedFp4,
                                    EntryFormat::kIndexFp4};

}  // namespace

TEST_CASE("packed formats: released entry sizes", "[unit][kv]") {
  CHECK(packed_bytes(EntryFormat::kWindowFp8, 512) == 528);
  CHECK(packed_bytes(EntryFormat::kCompressedFp4, 512) == 288);
  CHECK(packed_bytes(EntryFormat::kIndexFp4, 128) == 68);
}

TEST_CASE("packed formats: random fake-quantised vectors round-trip bit for bit", "[unit][kv]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-30.0f, 12.0f);
  for (EntryFormat f : kFormats) {
    INFO(entry_format_name(f));
    for (int trial = 0; trial < 400; ++trial) {
      std::vector<float> x(128);
      const float s = std::exp2(log_scale(rng));
      for (float& v : x) v = normal(rng) * s;
      if (trial % 5 == 0) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
      if (trial % 7 == 0) x[3] = -0.0f;
      if (trial % 11 == 0) x[5] *= 1e6f;  // outlier: max codes in its block, tiny others
      fake_quant(f, x);
      require_roundtrip(f, x);
    }
  }
}

TEST_CASE("packed formats: zeros, negative zero and max codes", "[unit][kv]") {
  for (EntryFormat f : kFormats) {
    INFO(entry_format_name(f));
    std::vector<float> z(64, 0.0f);
    require_roundtrip(f, z);
    z[0] = -0.0f;
    z[33] = -0.0f;
    require_roundtrip(f, z);
    std::vector<float> m(64);
    const float max_code = f == EntryFormat::kWindowFp8 ? 448.0f : 6.0f;
    for (size_t i = 0; i < m.size(); ++i) m[i] = (i % 2 ? -max_code : max_code) * 0.25f;
    require_roundtrip(f, m);
  }
  // FP4 code magnitudes 0..6 under an e4m3 scale 0.875 (not a power of two).
  std::vector<float> c(16);
  const float codes[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int i = 0; i < 16; ++i) c[i] = codes[i % 8] * 0.875f * (i >= 8 ? -1.0f : 1.0f);
  require_roundtrip(EntryFormat::kCompressedFp4, c);
}

TEST_CASE("packed formats: unrepresentable values and bad widths are errors", "[unit][kv]") {
  std::vector<uint8_t> out(600);
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.3f;  // 0.3 is not e2m1 x any scale that also holds 1.0
  CHECK_THROWS_WITH(pack(EntryFormat::kIndexFp4, x.data(), 32, out.data()),
                    Catch::Contains("index-key FP4") && Catch::Contains("block 0") &&
                        Catch::Contains("not fake-quantised"));
  CHECK_THROWS_WITH(pack(EntryFormat::kCompressedFp4, x.data(), 32, out.data()),
                    Catch::Contains("compressed FP4"));
  x[1] = 1.0f + 1.0f / 64;  // needs 6 mantissa bits: not e4m3
  CHECK_THROWS_WITH(pack(EntryFormat::kWindowFp8, x.data(), 32, out.data()),
                    Catch::Contains("window FP8"));
  x[1] = NAN;
  CHECK_THROWS_WITH(pack(EntryFormat::kWindowFp8, x.data(), 32, out.data()),
                    Catch::Contains("window FP8"));
  try {
    pack(EntryFormat::kWindowFp8, x.data(), 32, out.data());
  } catch (const detail::Failure& f) {
    CHECK(f.code() == ErrorCode::kInternal);
  }
  CHECK_THROWS_WITH(pack(EntryFormat::kWindowFp8, x.data(), 24, out.data()),
                    Catch::Contains("width 24 is not a positive multiple of the block 32"));
}

}  // namespace dsv41::kv
