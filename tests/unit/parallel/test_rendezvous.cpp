// Handshake encode/decode and the symmetric comparison that names the first
// difference.
#include <catch2/catch.hpp>

#include "core/check.hpp"
#include "parallel/rendezvous.hpp"

using namespace dsv41;
using namespace dsv41::parallel;

namespace {

Handshake rank_hs(int rank) {
  Handshake h;
  h.world = 2;
  h.rank = rank;
  h.config_hash = 0x1111;
  h.plan_hash = 0x2222;
  h.inventory_hash = 0x3333;
  h.settings = {{"kv_dtype", "fp8"}, {"max_context", "262144"}};
  return h;
}

std::string mismatch(const Handshake& a, const Handshake& b) {
  Status ab = compare_handshakes(a, b);
  Status ba = compare_handshakes(b, a);
  REQUIRE(ab.code() == ErrorCode::kInvalidArgument);
  REQUIRE(ab.message() == ba.message());  // both ranks report the same text
  return ab.message();
}

}  // namespace

TEST_CASE("handshake round-trips", "[unit][parallel]") {
  Handshake h = rank_hs(1);
  Handshake d = decode_handshake(encode_handshake(h));
  REQUIRE(d.world == 2);
  REQUIRE(d.rank == 1);
  REQUIRE(d.config_hash == 0x1111);
  REQUIRE(d.plan_hash == 0x2222);
  REQUIRE(d.inventory_hash == 0x3333);
  REQUIRE(d.settings == h.settings);
  REQUIRE(compare_handshakes(rank_hs(0), rank_hs(1)).is_ok());
}

TEST_CASE("handshake decode names truncation, magic and version", "[unit][parallel]") {
  std::vector<std::byte> bytes = encode_handshake(rank_hs(0));
  std::vector<std::byte> cut(bytes.begin(), bytes.end() - 3);
  try {
    decode_handshake(cut);
    FAIL("truncated handshake accepted");
  } catch (const detail::Failure& f) {
    REQUIRE(f.code() == ErrorCode::kCorruptFile);
    REQUIRE(std::string(f.what()).find("setting value") != std::string::npos);
  }
  std::vector<std::byte> bad = bytes;
  bad[0] = std::byte{'X'};
  REQUIRE_THROWS_WITH(decode_handshake(bad), Catch::Contains("not a dsv41 TP rank"));
  Handshake v = rank_hs(0);
  v.protocol_version = 99;
  REQUIRE_THROWS_WITH(decode_handshake(encode_handshake(v)),
                      Catch::Contains("peer speaks protocol version 99"));
  std::vector<std::byte> extra = bytes;
  extra.push_back(std::byte{0});
  REQUIRE_THROWS_WITH(decode_handshake(extra), Catch::Contains("1 trailing bytes"));
}

TEST_CASE("handshake comparison names the first difference", "[unit][parallel]") {
  Handshake a = rank_hs(0), b = rank_hs(1);
  b.world = 1;
  REQUIRE(mismatch(a, b) == "TP ranks disagree on world size: rank 0 has '2', rank 1 has '1'");
  b = rank_hs(0);
  REQUIRE(mismatch(a, b).find("both sides claim rank 0") != std::string::npos);
  b = rank_hs(1);
  b.protocol_version = 7;
  REQUIRE(mismatch(a, b).find("protocol versions 2 and 7") != std::string::npos);
  b = rank_hs(1);
  b.config_hash = 0x9999;
  REQUIRE(mismatch(a, b) ==
          "TP ranks disagree on config hash (model "
          "config.json): rank 0 has '0000000000001111', "
          "rank 1 has '0000000000009999'");
  b = rank_hs(1);
  b.inventory_hash = 1;
  REQUIRE(mismatch(a, b).find("tensor inventory hash") != std::string::npos);
  b = rank_hs(1);
  b.settings["max_context"] = "131072";
  b.settings["zz_later"] = "x";  // differs too, but after max_context in key order
  REQUIRE(mismatch(a, b) ==
          "TP ranks disagree on setting 'max_context': rank "
          "0 has '262144', rank 1 has '131072'");
  b = rank_hs(1);
  b.settings.erase("kv_dtype");
  REQUIRE(mismatch(a, b) ==
          "TP ranks disagree on setting 'kv_dtype': rank 0 "
          "has 'fp8', rank 1 has '<absent>'");
}

TEST_CASE("fnv1a_64 matches the published test vector", "[unit][parallel]") {
  REQUIRE(fnv1a_64("") == 0xcbf29ce484222325ull);
  REQUIRE(fnv1a_64("a") == 0xaf63dc4c8601ec8cull);
}
