// Launchers of the attention ops (spec model-architecture.md §2.2, §2.7, §2.8), mirroring the CPU
// reference model/attention/ (rope.cpp, kv_quant.cpp) and kv/packed_formats.cpp: raw device
// pointers, sizes, a stream; no allocation, no workspace. Invalid arguments return
// cudaErrorInvalidValue before anything is launched, else cudaGetLastError() after the launch.
// Layouts row-major, fp32 activations. See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dsv41::kernels {

// Rotates the trailing rope slice of every head (§2.2, = dsv41::rope_rotate per head):
//   x         [T, heads, head_dim] fp32, in place; pairs (2i, 2i+1) of x[t, h, head_dim-rope_dim:]
//   inv_freq  [rope_dim/2] fp32 (device): the "main" or the YaRN "compress" table of
//             model/attention/rope.hpp (the table picks the variant)
//   position of row t = pos0 + t·pos_step (pos_step 1 for tokens, ratio for compressed entries)
//   angle = fp32(pos)·f_i rounded to fp32, cos/sin in fp64 rounded to fp32, then two unfused
//   products and one sum per output; inverse = rotation by -angle (§2.2 step 6, output heads).
// Needs T >= 0, heads >= 1, 2 <= rope_dim <= head_dim, rope_dim even, pos0 >= 0, pos_step >= 0,
// non-null pointers.
cudaError_t rope_rotate(float* x, const float* inv_freq, int64_t T, int heads, int head_dim,
                        int rope_dim, int64_t pos0, int64_t pos_step, bool inverse,
                        cudaStream_t stream);

// The three KV entry formats of §2.7/§2.8 (= kv::EntryFormat, same byte layouts):
//   kWindowFp8      block 32, e4m3 codes + ue8m0 scales: [dim codes][dim/32 scales]
//   kCompressedFp4  block 16, e2m1 nibbles + e4m3 scales: [dim/2 bytes][dim/16 scales]
//   kIndexFp4       block 32, e2m1 nibbles + ue8m0 scales: [dim/2 bytes][dim/32 scales]
// Nibbles: element 2i low, 2i+1 high.
enum class KvFormat : int { kWindowFp8 = 0, kCompressedFp4 = 1, kIndexFp4 = 2 };

// Block of the format (32, 16, 32) and packed bytes of one entry of `dim` values (-1 when dim is
// not a positive multiple of the block).
int kv_block_size(KvFormat f);
int64_t kv_packed_bytes(KvFormat f, int64_t dim);

// Fake-quantises rows of x exactly as model/attention/kv_quant.cpp (fake_quant_window_fp8 /
// fake_quant_compressed_fp4 / fake_quant_index_fp4) and packs the result exactly as
// kv::pack() (its canonical scale choice), bit for bit:
//   x       [rows, dim] fp32
//   xq      [rows, dim] fp32 fake-quantised values, or nullptr; may alias x
//   packed  [rows, kv_packed_bytes(f, dim)] bytes (row stride = that size), or nullptr
// One thread per block. A block kv::pack() would reject (only possible for NaN/inf inputs, which
// the reference rejects with kInternal) gets scale byte 0xFF (NaN in both scale types).
// Needs rows >= 0, dim a positive multiple of kv_block_size(f), x non-null, f a listed format.
cudaError_t kv_quantize(KvFormat f, const float* x, float* xq, uint8_t* packed, int64_t rows,
                        int64_t dim, cudaStream_t stream);

}  // namespace dsv41::kernels
