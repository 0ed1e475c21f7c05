// The three procedural EXL3 codebooks: 16-bit trellis state -> fp16 weight (spec exl3-format.md
// §1.5). Values are bit-exact with exllamav3's CUDA decode_3inst<cb> (one fp16 rounding each).
#pragma once

#include <cstdint>

namespace dsv41::exl3 {

// Selected per tensor by its marker (§2.2): none = 3INST, `mcg` = MCG, `mul1` = MUL1.
enum class Codebook : uint8_t { k3Inst = 0, kMcg = 1, kMul1 = 2 };

const char* codebook_name(Codebook cb);  // "3inst", "mcg", "mul1"

// Direct evaluation (fp16 bits) of one state; the reference the LUT is built from.
uint16_t codebook_eval(Codebook cb, uint16_t state);

// The 65536-entry fp16 (bits) and fp32 LUTs indexed by state, built once per process
// (thread-safe) and kept for its lifetime (128 KiB + 256 KiB per codebook).
const uint16_t* codebook_lut_f16(Codebook cb);
const float* codebook_lut_f32(Codebook cb);

}  // namespace dsv41::exl3
