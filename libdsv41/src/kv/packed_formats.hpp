// Byte layouts of the three quantised KV entry formats of spec model-architecture.md §2.7/§2.8,
// and exact pack/unpack between them and the fake-quantised fp32 values the reference computes.
// A fake-quantised value is code × scale exactly (the products are exact in fp32), so pack()
// recovers a (code, scale) pair per block and unpack(pack(x)) == x bit for bit, -0 included.
//   window  (FP8 e4m3, block 32, ue8m0):  [n codes][n/32 scale bytes]      512 + 16 = 528 B
//   compressed (FP4 e2m1, block 16, e4m3): [n/2 nibble pairs][n/16 scales]  256 + 32 = 288 B
//   index key (FP4 e2m1, block 32, ue8m0): [n/2 nibble pairs][n/32 scales]   64 +  4 =  68 B
// Nibbles: element 2i in the low nibble, 2i+1 in the high nibble (the checkpoint's FP4 order).
// A value that is not code × scale for any scale of the format is a bug upstream: kInternal.
#pragma once

#include <cstdint>

namespace dsv41::kv {

enum class EntryFormat : uint8_t { kWindowFp8, kCompressedFp4, kIndexFp4 };

const char* entry_format_name(EntryFormat f);
int block_size(EntryFormat f);  // 32, 16, 32
// Packed bytes of one entry of `dim` values (dim must be a multiple of the block).
int64_t packed_bytes(EntryFormat f, int64_t dim);

// x [dim] fake-quantised fp32 -> out [packed_bytes(f, dim)]. Throws kInternal naming the block
// and value when x is not representable, kInvalidArgument when dim is not a block multiple.
void pack(EntryFormat f, const float* x, int64_t dim, uint8_t* out);
// in [packed_bytes(f, dim)] -> x [dim]; exact inverse of pack().
void unpack(EntryFormat f, const uint8_t* in, int64_t dim, float* x);

}  // namespace dsv41::kv
