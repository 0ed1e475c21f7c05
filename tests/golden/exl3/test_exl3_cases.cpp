// Every single-matrix case and expert triple of golden/exl3/manifest.json: Ŵ bit for bit, states,
// W within 1 fp32 ulp of the correctly rounded oracle, y and the whole-expert FFN within tolerance;
// and the three 65536-entry LUTs.
#include <catch2/catch.hpp>
#include <cmath>

#include "exl3/codebook.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/exl3_tensor.hpp"
#include "exl3/trellis_tile.hpp"
#include "golden_io.hpp"
#include "support/tolerance.hpp"

using namespace dsv41;
using namespace dsv41::exl3;
using dsv41::test::exl3_fixture;

namespace {

// y is rebuilt in fp32 (Hadamard-domain path); the oracle is fp64 from the exact W. trellis-serve's
// fp32 path is within 7e-7·max|y| (README); allow 3e-6·max|y| for summation order.
constexpr double kYRelTol = 3e-6;

Codebook codebook_named(std::string_view name) {
  if (name == "mul1") return Codebook::kMul1;
  if (name == "mcg") return Codebook::kMcg;
  REQUIRE(name == "3inst");
  return Codebook::k3Inst;
}

void check_matrix(const SafetensorsFile& f, const std::string& prefix, const std::string& exp,
                  int K, Codebook cb, int64_t k, int64_t n) {
  INFO("file " << f.path() << " prefix " << prefix);
  const Exl3Tensor t = load_exl3_tensor(f, prefix);
  REQUIRE(t.K == K);
  REQUIRE(t.codebook == cb);
  REQUIRE(t.k == k);
  REQUIRE(t.n == n);

  const std::vector<float> states_want = test::f32_of(f, exp + ".states_row0");
  REQUIRE(states_want.size() == static_cast<size_t>(t.tiles_n() * kTileElems));
  for (int64_t tn = 0; tn < t.tiles_n(); ++tn) {
    uint16_t states[kTileElems];
    tile_states(t.tile(0, tn), t.K, states);
    for (int s = 0; s < kTileElems; ++s) {
      INFO("tile (0, " << tn << ") stream position " << s);
      REQUIRE(states[s] == static_cast<uint16_t>(states_want[tn * kTileElems + s]));
    }
  }

  const std::vector<uint16_t> inner = decode_inner(t);
  const std::vector<uint16_t> inner_want = test::u16_of(f, exp + ".w_inner");
  REQUIRE(inner.size() == inner_want.size());
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < inner.size(); ++i)
    if (inner[i] != inner_want[i] && mismatches++ == 0) first = i;
  INFO("w_inner: " << mismatches << " fp16 mismatches, first at flat index " << first);
  REQUIRE(mismatches == 0);

  test::require_rel_ulps(prefix + " W", reconstruct_weight(t), test::f32_of(f, exp + ".w"), 1.0);

  const std::vector<float> x = test::f32_of(f, exp + ".x");
  const std::vector<float> y_want = test::f32_of(f, exp + ".y");
  const size_t rows = x.size() / static_cast<size_t>(k);
  std::vector<float> y(rows * static_cast<size_t>(n));
  matmul(t, x.data(), rows, y.data());
  test::require_close(prefix + " y", y, y_want, y.size(), kYRelTol * test::max_abs(y_want));
}

}  // namespace

TEST_CASE("exl3 golden: LUTs equal lut_full and lut_vectors", "[golden][exl3]") {
  auto lut_file = SafetensorsFile::open(exl3_fixture("lut_full.safetensors"));
  for (Codebook cb : {Codebook::k3Inst, Codebook::kMcg, Codebook::kMul1}) {
    const std::string name = std::string("lut.") + codebook_name(cb);
    const std::vector<uint16_t> want = test::u16_of(*lut_file, name);
    REQUIRE(want.size() == 65536);
    const uint16_t* lut = codebook_lut_f16(cb);
    for (uint32_t s = 0; s < 65536; ++s) {
      INFO(name << " state " << s);
      REQUIRE(lut[s] == want[s]);
    }
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.load(exl3_fixture("lut_vectors.json"));
  size_t checked = 0;
  for (auto [cb_name, entry] : root["codebooks"].get_object()) {
    const Codebook cb = codebook_named(cb_name);
    for (simdjson::dom::element v : entry["vectors"].get_array()) {
      const auto state = std::stoul(std::string(v["state"].get_string().value()), nullptr, 16);
      const auto bits = std::stoul(std::string(v["bits"].get_string().value()), nullptr, 16);
      INFO(cb_name << " state " << state);
      REQUIRE(codebook_eval(cb, static_cast<uint16_t>(state)) == bits);
      REQUIRE(codebook_lut_f16(cb)[state] == bits);
      ++checked;
    }
  }
  REQUIRE(checked == 60);
}

TEST_CASE("exl3 golden: every single-matrix case", "[golden][exl3]") {
  simdjson::dom::parser parser;
  simdjson::dom::element manifest = parser.load(exl3_fixture("manifest.json"));
  size_t n_cases = 0;
  for (simdjson::dom::element c : manifest["cases"].get_array()) {
    INFO("case " << c["name"].get_string().value());
    auto f = SafetensorsFile::open(exl3_fixture(std::string(c["file"].get_string().value())));
    check_matrix(*f, std::string(c["prefix"].get_string().value()),
                 std::string(c["expected_prefix"].get_string().value()),
                 static_cast<int>(c["K"].get_int64().value()),
                 codebook_named(c["codebook"].get_string().value()), c["k"].get_int64().value(),
                 c["n"].get_int64().value());
    ++n_cases;
  }
  REQUIRE(n_cases == 15);
}

TEST_CASE("exl3 golden: expert triples and the whole-expert FFN", "[golden][exl3]") {
  simdjson::dom::parser parser;
  simdjson::dom::element manifest = parser.load(exl3_fixture("manifest.json"));
  size_t n_experts = 0;
  for (simdjson::dom::element e : manifest["experts"].get_array()) {
    auto f = SafetensorsFile::open(exl3_fixture(std::string(e["file"].get_string().value())));
    const int K = static_cast<int>(e["K"].get_int64().value());
    const Codebook cb = codebook_named(e["codebook"].get_string().value());
    for (auto [w, m] : e["matrices"].get_object()) {
      check_matrix(*f, std::string(m["prefix"].get_string().value()),
                   std::string(m["expected_prefix"].get_string().value()), K, cb,
                   m["k"].get_int64().value(), m["n"].get_int64().value());
    }
    const Exl3Tensor w1 = load_exl3_tensor(*f, "layers.0.ffn.experts.0.w1");
    const Exl3Tensor w3 = load_exl3_tensor(*f, "layers.0.ffn.experts.0.w3");
    const Exl3Tensor w2 = load_exl3_tensor(*f, "layers.0.ffn.experts.0.w2");
    const std::vector<float> x = test::f32_of(*f, "expected.ffn.x");
    const size_t rows = x.size() / static_cast<size_t>(w1.k);
    std::vector<float> g(rows * w1.n), u(rows * w3.n), y(rows * w2.n);
    matmul(w1, x.data(), rows, g.data());
    matmul(w3, x.data(), rows, u.data());
    const std::vector<float> g_want = test::f32_of(*f, "expected.ffn.g");
    const std::vector<float> u_want = test::f32_of(*f, "expected.ffn.u");
    test::require_close("ffn g", g, g_want, g.size(), kYRelTol * test::max_abs(g_want));
    test::require_close("ffn u", u, u_want, u.size(), kYRelTol * test::max_abs(u_want));
    std::vector<float> h(g.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    const std::vector<float> h_want = test::f32_of(*f, "expected.ffn.h");
    test::require_close("ffn h", h, h_want, h.size(), 1e-5 * test::max_abs(h_want));
    matmul(w2, h.data(), rows, y.data());
    const std::vector<float> y_want = test::f32_of(*f, "expected.ffn.y");
    test::require_close("ffn y", y, y_want, y.size(), 1e-5 * test::max_abs(y_want));
    ++n_experts;
  }
  REQUIRE(n_experts == 3);
}
