// Codebook spec vectors, the tile bit stream against an independent bit-by-bit packer, the
// tensor-core permutation, and Hadamard-128 identities (spec exl3-format.md §1.3-1.5, §2.1).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "exl3/codebook.hpp"
#include "exl3/hadamard.hpp"
#include "exl3/trellis_tile.hpp"

using namespace dsv41::exl3;

TEST_CASE("exl3 codebooks match the spec's test vectors", "[unit][exl3]") {
  struct V {
    Codebook cb;
    uint16_t state, bits;
  };
  // exl3-format.md §1.5 "state -> fp16 bits".
  const V vectors[] = {
      {Codebook::k3Inst, 0x0000, 0x3a25}, {Codebook::k3Inst, 0x0001, 0xbb5b},
      {Codebook::k3Inst, 0x1234, 0xc066}, {Codebook::k3Inst, 0xffff, 0xb110},
      {Codebook::kMcg, 0x0000, 0x3f60},   {Codebook::kMcg, 0x0001, 0x304e},
      {Codebook::kMcg, 0x1234, 0x3e0f},   {Codebook::kMcg, 0xffff, 0x3acd},
      {Codebook::kMul1, 0x0000, 0xc2e8},  {Codebook::kMul1, 0x0001, 0x3921},
      {Codebook::kMul1, 0x1234, 0xb89e},  {Codebook::kMul1, 0xffff, 0xb936},
  };
  for (const V& v : vectors) {
    INFO(codebook_name(v.cb) << " state " << v.state);
    REQUIRE(codebook_eval(v.cb, v.state) == v.bits);
    REQUIRE(codebook_lut_f16(v.cb)[v.state] == v.bits);
  }
}

TEST_CASE("exl3 codebook LUT statistics match the spec table", "[unit][exl3]") {
  // exl3-format.md §1.5: std 1.24371 (3INST), 1.24411 (MCG), 1.00031 (MUL1).
  const std::pair<Codebook, double> stds[] = {
      {Codebook::k3Inst, 1.24371}, {Codebook::kMcg, 1.24411}, {Codebook::kMul1, 1.00031}};
  for (auto [cb, want] : stds) {
    const float* lut = codebook_lut_f32(cb);
    double s = 0, s2 = 0;
    for (int i = 0; i < 65536; ++i) {
      s += lut[i];
      s2 += double(lut[i]) * lut[i];
    }
    const double mean = s / 65536, sd = std::sqrt(s2 / 65536 - mean * mean);
    INFO(codebook_name(cb));
    REQUIRE(std::fabs(sd - want) < 1e-5);
  }
}

namespace {

// Independent packer: symbols -> MSB-first stream -> uint32 words -> int16 pairs (pack.cu's SWAP16
// layout), then states by the literal window rule of §1.3 (bit by bit, modulo the ring).
struct PackedTile {
  std::vector<int16_t> trellis;
  std::vector<uint16_t> states;
};

PackedTile pack(const std::vector<uint32_t>& sym, int K) {
  const int ring = 256 * K;
  std::vector<int> bits(ring);
  for (int t = 0; t < 256; ++t)
    for (int b = 0; b < K; ++b) bits[t * K + b] = (sym[t] >> (K - 1 - b)) & 1;
  PackedTile p;
  p.trellis.resize(16 * K);
  for (int w = 0; w < 8 * K; ++w) {
    uint32_t word = 0;
    for (int i = 0; i < 32; ++i) word |= static_cast<uint32_t>(bits[32 * w + i]) << (31 - i);
    const uint16_t lo = word & 0xFFFF, hi = word >> 16;
    std::memcpy(&p.trellis[2 * w], &lo, 2);
    std::memcpy(&p.trellis[2 * w + 1], &hi, 2);
  }
  for (int t = 0; t < 256; ++t) {
    const int b0 = (((t + 1) * K - 16) % ring + ring) % ring;
    uint32_t s = 0;
    for (int i = 0; i < 16; ++i) s = (s << 1) | bits[(b0 + i) % ring];
    p.states.push_back(static_cast<uint16_t>(s));
  }
  return p;
}

}  // namespace

TEST_CASE("exl3 tile states follow the window rule for K = 1..8", "[unit][exl3]") {
  std::mt19937 rng(42);
  for (int K = 1; K <= 8; ++K) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint32_t> sym(256);
      for (auto& s : sym) s = rng() & ((1u << K) - 1);
      const PackedTile p = pack(sym, K);
      uint16_t states[kTileElems];
      tile_states(p.trellis.data(), K, states);
      for (int t = 0; t < 256; ++t) {
        INFO("K " << K << " trial " << trial << " t " << t);
        REQUIRE(states[t] == p.states[t]);
        // The low K bits of every state are that position's symbol (pack.cu stores only those).
        REQUIRE((states[t] & ((1u << K) - 1)) == sym[t]);
      }
    }
  }
}

TEST_CASE("exl3 tensor-core permutation", "[unit][exl3]") {
  std::set<int> cells;
  for (int t = 0; t < kTileElems; ++t) cells.insert(tile_cell(t));
  REQUIRE(cells.size() == 256);
  REQUIRE(*cells.rbegin() == 255);
  // Lane 0: (0,0) (1,0) (8,0) (9,0) (0,8) (1,8) (8,8) (9,8); lane 1 starts at row 2; lane 4 at
  // col 1.
  const int lane0[8] = {0, 16, 128, 144, 8, 24, 136, 152};
  for (int j = 0; j < 8; ++j) REQUIRE(tile_cell(j) == lane0[j]);
  REQUIRE(tile_cell(8) == 2 * 16 + 0);
  REQUIRE(tile_cell(32) == 0 * 16 + 1);
  REQUIRE(tile_cell(255) == 15 * 16 + 15);  // lane 31: r0 = 6, c0 = 7 -> (r0+9, c0+8)

  // decode_tile places LUT[state(t)] at tile_cell(t).
  std::vector<uint32_t> sym(256);
  std::mt19937 rng(3);
  for (auto& s : sym) s = rng() & 7;
  const PackedTile p = pack(sym, 3);
  float lut[65536];
  for (int i = 0; i < 65536; ++i) lut[i] = static_cast<float>(i);
  float out[kTileElems];
  decode_tile_f32(p.trellis.data(), 3, lut, out);
  for (int t = 0; t < 256; ++t) REQUIRE(out[tile_cell(t)] == static_cast<float>(p.states[t]));
}

TEST_CASE("exl3 Hadamard-128: orthonormal, involutive, Sylvester order", "[unit][exl3]") {
  std::vector<float> e(256, 0.0f);
  e[128 + 3] = 1.0f;  // second block, basis vector 3 -> column 3 of H: (-1)^popcount(i & 3)/√128
  hadamard128_blocks(e.data(), e.size());
  for (int i = 0; i < 128; ++i) {
    REQUIRE(e[i] == 0.0f);
    const float want = (__builtin_popcount(i & 3) % 2 ? -1.0f : 1.0f) / std::sqrt(128.0f);
    REQUIRE(std::fabs(e[128 + i] - want) < 1e-7f);
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> v(384), w;
  for (auto& x : v) x = normal(rng);
  w = v;
  hadamard128_blocks(w.data(), w.size());
  double n0 = 0, n1 = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    n0 += double(v[i]) * v[i];
    n1 += double(w[i]) * w[i];
  }
  REQUIRE(std::fabs(n0 - n1) < 1e-4 * n0);
  hadamard128_blocks(w.data(), w.size());
  for (size_t i = 0; i < v.size(); ++i) REQUIRE(std::fabs(w[i] - v[i]) < 1e-5f);
}
