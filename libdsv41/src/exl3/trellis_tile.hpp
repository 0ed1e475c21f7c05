// One 16x16 EXL3 tile: the tail-biting bit stream of 256*K bits, its 256 trellis states, and the
// tensor-core element order (spec exl3-format.md §1.2-1.4).
#pragma once

#include <cstdint>

namespace dsv41::exl3 {

constexpr int kTileSize = 16;  // tiles are 16x16 weights
constexpr int kTileElems = 256;
constexpr int kMinBits = 1;  // valid K (bits per weight) in exllamav3 v1.4.1
constexpr int kMaxBits = 8;

// States in stream order: state(t) is the 16-bit window of the MSB-first stream that ends at bit
// (t+1)*K (exclusive), modulo 256*K. `tile` is the tile's 16*K int16 values (little-endian
// uint32 pairs: word j = u16(tile[2j]) | u16(tile[2j+1]) << 16), any alignment. K in [1, 8].
void tile_states(const void* tile, int K, uint16_t states[kTileElems]);

// Row-major cell (row * 16 + col; row = input/k index, col = output/n index) of stream element t:
// t = 8L + j, r0 = 2(L%4), c0 = L/4, j -> (r0,c0) (r0+1,c0) (r0+8,c0) (r0+9,c0) then c0+8 (§1.4).
int tile_cell(int t);

// Decodes a tile through a state -> value LUT into out[16*16], row-major (row = k, col = n).
void decode_tile_f16(const void* tile, int K, const uint16_t* lut, uint16_t out[kTileElems]);
void decode_tile_f32(const void* tile, int K, const float* lut, float out[kTileElems]);

}  // namespace dsv41::exl3
