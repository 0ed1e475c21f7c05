// The one reduction rule of every world-2 TpComm: out = x_rank0 + x_rank1, in
// fp32; bf16 inputs are widened, summed in that order and rounded once to bf16
// (RNE, quant/dtype.hpp). Both ranks apply it to the same two operands, so
// their results are bit-identical (docs/tp.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "quant/dtype.hpp"

namespace dsv41::parallel {

// mine: this rank's values, overwritten with the sum; peer: the other rank's
// bytes (unaligned).
inline void sum_rank_order_f32(std::span<float> mine, const std::byte* peer, int rank) {
  for (size_t i = 0; i < mine.size(); ++i) {
    float p;
    std::memcpy(&p, peer + i * sizeof(float), sizeof(float));
    mine[i] = rank == 0 ? mine[i] + p : p + mine[i];
  }
}

inline void sum_rank_order_bf16(std::span<uint16_t> mine, const std::byte* peer, int rank) {
  for (size_t i = 0; i < mine.size(); ++i) {
    uint16_t p;
    std::memcpy(&p, peer + i * sizeof(uint16_t), sizeof(uint16_t));
    float r0 = bf16_to_f32(rank == 0 ? mine[i] : p);
    float r1 = bf16_to_f32(rank == 0 ? p : mine[i]);
    mine[i] = f32_to_bf16(r0 + r1);
  }
}

}  // namespace dsv41::parallel
