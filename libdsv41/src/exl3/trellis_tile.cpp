// Tile bit stream decode (spec exl3-format.md §1.3) and tensor-core permutation (§1.4).
#include "exl3/trellis_tile.hpp"

#include <array>
#include <cstring>

#include "core/check.hpp"

namespace dsv41::exl3 {

namespace {

// `width` (<= 16) stream bits starting at bit p, MSB first. `words` holds the ring's 8K words
// followed by a copy of word 0, so two consecutive words cover any window ((p % 32) + width
// <= 47) without a modulo.
inline uint32_t stream_bits(const uint32_t* words, int p, int width) {
  const int w = p >> 5, off = p & 31;
  const uint64_t pair = (static_cast<uint64_t>(words[w]) << 32) | words[w + 1];
  return static_cast<uint32_t>(pair >> (64 - off - width)) & ((1u << width) - 1);
}

// Shift register: state(t) = (state(t-1) << K | sym(t)) & 0xFFFF where sym(t) is stream bits
// [tK, (t+1)K); state(-1) is the window ending at bit 0, i.e. the ring's last 16 bits. This is
// the window rule of §1.3 (16 bits ending at (t+1)K), also when 16 % K != 0. K is a template
// parameter so the shifts and word indices fold to constants.
template <int K>
void states_k(const uint32_t* words, uint16_t* states) {
  uint32_t state = stream_bits(words, 256 * K - 16, 16);
  for (int t = 0; t < kTileElems; ++t) {
    state = ((state << K) | stream_bits(words, t * K, K)) & 0xFFFFu;
    states[t] = static_cast<uint16_t>(state);
  }
}

constexpr std::array<uint16_t, kTileElems> make_cells() {
  std::array<uint16_t, kTileElems> cells{};
  for (int t = 0; t < kTileElems; ++t) {
    const int lane = t / 8, j = t % 8;
    const int r0 = 2 * (lane % 4), c0 = lane / 4;
    constexpr int kRowOffset[4] = {0, 1, 8, 9};
    const int row = r0 + kRowOffset[j % 4];
    const int col = c0 + (j < 4 ? 0 : 8);
    cells[t] = static_cast<uint16_t>(row * kTileSize + col);
  }
  return cells;
}
constexpr std::array<uint16_t, kTileElems> kCells = make_cells();

}  // namespace

void tile_states(const void* tile, int K, uint16_t states[kTileElems]) {
  DSV41_CHECK(K >= kMinBits && K <= kMaxBits, kInvalidArgument,
              "EXL3 tile decode: K = {} is outside 1..8", K);
  // 8K words of the ring plus the wrap copy; copied because tensor data in a file need not be
  // 4-byte aligned. A little-endian load of the int16 pair gives word j = T[2j] | T[2j+1] << 16.
  uint32_t words[8 * kMaxBits + 1];
  std::memcpy(words, tile, static_cast<size_t>(8 * K) * 4);
  words[8 * K] = words[0];
  switch (K) {
    case 1:
      return states_k<1>(words, states);
    case 2:
      return states_k<2>(words, states);
    case 3:
      return states_k<3>(words, states);
    case 4:
      return states_k<4>(words, states);
    case 5:
      return states_k<5>(words, states);
    case 6:
      return states_k<6>(words, states);
    case 7:
      return states_k<7>(words, states);
    default:
      return states_k<8>(words, states);
  }
}

int tile_cell(int t) { return kCells[t]; }

void decode_tile_f16(const void* tile, int K, const uint16_t* lut, uint16_t out[kTileElems]) {
  uint16_t states[kTileElems];
  tile_states(tile, K, states);
  for (int t = 0; t < kTileElems; ++t) out[kCells[t]] = lut[states[t]];
}

void decode_tile_f32(const void* tile, int K, const float* lut, float out[kTileElems]) {
  uint16_t states[kTileElems];
  tile_states(tile, K, states);
  for (int t = 0; t < kTileElems; ++t) out[kCells[t]] = lut[states[t]];
}

}  // namespace dsv41::exl3
