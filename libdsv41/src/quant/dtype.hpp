// Scalar storage formats of the checkpoint and their exact conversions to and from fp32
// (spec model-architecture.md §1.4, §2.7). All conversions are bit-exact and table-free except
// where noted; rounding is round-to-nearest-even everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dsv41 {

// safetensors dtype strings, in the order of the safetensors spec.
enum class DType : uint8_t { kBF16, kF16, kF32, kF64, kI8, kI16, kI32, kI64, kU8, kF8E4M3, kF8E8M0 };

std::optional<DType> dtype_from_name(std::string_view name);  // "BF16", "F8_E4M3", ...
const char* dtype_name(DType t);
size_t dtype_size(DType t);  // bytes per element

float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float x);  // RNE; NaN stays NaN
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float x);   // RNE, overflow to inf

// FP8 e4m3fn: bias 7, no infinities, S.1111.111 = NaN, max finite 448, min subnormal 2^-9.
float e4m3_to_f32(uint8_t bits);
// Nearest e4m3 value (RNE); |x| > 448 saturates to ±448; NaN -> 0x7F.
uint8_t f32_to_e4m3(float x);
inline float round_e4m3(float x) { return e4m3_to_f32(f32_to_e4m3(x)); }

// E8M0 scale byte e = 2^(e-127); 0xFF = NaN.
float e8m0_to_f32(uint8_t bits);

// FP4 e2m1 code (bit 3 = sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6}).
float e2m1_to_f32(uint8_t code);
// Nearest e2m1 code, ties to the even code (0.25 down, 0.75 up, 1.25 down, 1.75 up, 2.5 down,
// 3.5 up, 5 down); |x| > 6 saturates. Sign of -0 is kept.
uint8_t f32_to_e2m1(float x);

// 2^ceil(log2(x)) for finite x > 0, from the IEEE bits: 2^(exp - 127 + [mantissa != 0]).
float pow2_ceil(float x);

// Dense FP8 weight [rows, cols] with E8M0 block scales [ceil(rows/br), ceil(cols/bc)]
// (released block 32x32) -> fp32 out[rows*cols] row-major.
void dequant_fp8_blocked(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                         int64_t block_rows, int64_t block_cols, float* out);
// Packed FP4 weight [rows, cols/2] (even column = low nibble) with E8M0 scales
// [rows, cols/block] (released block 32) -> fp32 out[rows*cols].
void dequant_fp4_rowblocked(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                            int64_t block, float* out);

}  // namespace dsv41
