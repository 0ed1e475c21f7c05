// safetensors parsing: round trip through the writer, and every rejection names the file and
// tensor.
#include <catch2/catch.hpp>

#include "core/check.hpp"
#include "loader/safetensors.hpp"
#include "temp_dir.hpp"

using namespace dsv41;
using dsv41::test::raw_safetensors;
using dsv41::test::TempDir;

namespace {
std::string parse_error(const std::string& header, size_t data_bytes) {
  const std::string bytes = raw_safetensors(header, data_bytes);
  try {
    SafetensorsHeader::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                             "t.safetensors");
  } catch (const detail::Failure& f) {
    REQUIRE(f.code() == ErrorCode::kCorruptFile);
    return f.message();
  }
  return "";
}
}  // namespace

TEST_CASE("safetensors: writer output parses back with identical bytes", "[unit][loader]") {
  TempDir dir;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> b = {7, 8, 9};
  write_safetensors(dir.file("x.safetensors"),
                    {{"a", DType::kF32, {2, 3}, {reinterpret_cast<uint8_t*>(a.data()), 24}},
                     {"b.scale", DType::kF8E8M0, {3}, {b.data(), 3}}},
                    {{"format", "pt"}});
  auto f = SafetensorsFile::open(dir.file("x.safetensors"));
  REQUIRE(f->header().metadata.at("format") == "pt");
  const TensorInfo* ia = f->find_info("a");
  REQUIRE(ia != nullptr);
  REQUIRE(ia->shape == std::vector<int64_t>{2, 3});
  REQUIRE(tensor_to_f32(f->view(*ia)) == a);
  const TensorInfo* ib = f->find_info("b.scale");
  REQUIRE(ib->dtype == DType::kF8E8M0);
  REQUIRE(tensor_to_f32(f->view(*ib))[2] == std::ldexp(1.0f, 9 - 127));
  REQUIRE(f->find_info("c") == nullptr);
}

TEST_CASE("safetensors: malformed headers are rejected with a named reason", "[unit][loader]") {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  CHECK(parse_error("{" + ok_entry + "}", 8).empty());
  CHECK_THAT(parse_error("{" + ok_entry + "}", 4),
             Catch::Contains("'t'") && Catch::Contains("outside the data section"));
  CHECK_THAT(parse_error(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
             Catch::Contains("need 12 bytes"));
  CHECK_THAT(parse_error(R"({"t":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8),
             Catch::Contains("unsupported dtype 'Q4'"));
  CHECK_THAT(parse_error(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
             Catch::Contains("non-negative"));
  CHECK_THAT(parse_error(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
             Catch::Contains("data_offsets"));
  CHECK_THAT(parse_error(R"({"t":{"dtype":"F32","shape":[2]}})", 8),
             Catch::Contains("data_offsets must be [begin, end]"));
  CHECK_THAT(parse_error(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8),
             Catch::Contains("dtype"));
  CHECK_THAT(parse_error("{" + ok_entry + "," + ok_entry + "}", 8), Catch::Contains("duplicate"));
  CHECK_THAT(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                            "b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         12),
             Catch::Contains("overlap"));
  // An empty tensor sorted between two overlapping ones, and a short tensor inside a long one
  // with a gap-free neighbour after it: both overlaps are still found.
  CHECK_THAT(parse_error(R"({"a":{"dtype":"U8","shape":[100],"data_offsets":[0,100]},
                            "z":{"dtype":"U8","shape":[0],"data_offsets":[10,10]},
                            "c":{"dtype":"U8","shape":[16],"data_offsets":[50,66]}})",
                         100),
             Catch::Contains("tensors 'a' and 'c' overlap"));
  CHECK_THAT(parse_error(R"({"a":{"dtype":"U8","shape":[100],"data_offsets":[0,100]},
                            "b":{"dtype":"U8","shape":[10],"data_offsets":[10,20]},
                            "c":{"dtype":"U8","shape":[10],"data_offsets":[20,30]}})",
                         100),
             Catch::Contains("tensors 'a' and 'b' overlap"));
  CHECK(parse_error(R"({"a":{"dtype":"U8","shape":[10],"data_offsets":[0,10]},
                       "z":{"dtype":"U8","shape":[0],"data_offsets":[5,5]},
                       "b":{"dtype":"U8","shape":[10],"data_offsets":[10,20]}})",
                    20)
            .empty());
  CHECK_THAT(parse_error("{\"t\": [", 0), Catch::Contains("not valid JSON"));
  CHECK_THAT(parse_error("[1,2]", 0), Catch::Contains("not a JSON object"));
  CHECK_THAT(
      parse_error(R"({"__metadata__":{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":1}}}}}}}}})", 0),
      Catch::Contains("JSON"));
  CHECK_THAT(parse_error(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],
                            "data_offsets":[0,8]}})",
                         8),
             Catch::Contains("overflows"));
  // Zero elements, but TensorInfo::numel() would overflow int64 on the way (2^62 · 3).
  CHECK_THAT(parse_error(R"({"t":{"dtype":"I32","shape":[4611686018427387904,3,0],
                            "data_offsets":[0,0]}})",
                         0),
             Catch::Contains("'t': shape overflows"));
  CHECK(parse_error(R"({"t":{"dtype":"I32","shape":[4611686018427387904,0],
                       "data_offsets":[0,0]}})",
                    0)
            .empty());
  CHECK_THAT(parse_error(R"({"__metadata__":{"a":1}})", 0), Catch::Contains("not a string"));
}

TEST_CASE("safetensors: truncated files and impossible header lengths", "[unit][loader]") {
  auto err = [](const std::string& bytes) -> std::string {
    try {
      SafetensorsHeader::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f");
    } catch (const detail::Failure& f) {
      return f.message();
    }
    return "";
  };
  CHECK_THAT(err("abc"), Catch::Contains("truncated"));
  std::string huge(8, '\xff');
  CHECK_THAT(err(huge), Catch::Contains("exceeds"));
  std::string longer = raw_safetensors("{}", 0);
  longer[0] = 100;  // claims 100 header bytes, file has 2
  CHECK_THAT(err(longer), Catch::Contains("exceeds the file size"));
  CHECK(err(raw_safetensors("{}", 0)).empty());
}

TEST_CASE("safetensors: open() of a missing or empty file names the path", "[unit][loader]") {
  TempDir dir;
  try {
    SafetensorsFile::open(dir.file("nope.safetensors"));
    FAIL("no error");
  } catch (const detail::Failure& f) {
    REQUIRE(f.code() == ErrorCode::kNotFound);
    REQUIRE_THAT(f.message(), Catch::Contains("nope.safetensors"));
  }
  dir.write("empty.safetensors", "");
  REQUIRE_THROWS_WITH(SafetensorsFile::open(dir.file("empty.safetensors")),
                      Catch::Contains("empty.safetensors") && Catch::Contains("truncated"));
}
