// Launchers of the attention ops (spec model-architecture.md §2.2, §2.7, §2.8), mirroring the CPU
// reference model/attention/ (rope.cpp, kv_quant.cpp) and kv/packed_formats.cpp: raw device
// pointers, sizes, a workspace where one is needed, a stream; no allocation. Invalid arguments
// return cudaErrorInvalidValue before anything is launched, else cudaGetLastError() after the
// launch.
// Layouts row-major, fp32 activations. See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
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

// What kv_norm_rope_quantize does to each row before kv_quantize's step; null pointers skip a
// step. Rows of one position: rows_per_position consecutive rows (heads of one token) share it.
struct KvRowOps {
  const float* norm_w = nullptr;  // [dim] RMSNorm weights (rms_norm of the row with eps)
  float eps = 0.0f;
  const float* inv_freq = nullptr;  // [rope_dim/2] RoPE table (rope_rotate of the trailing slice)
  int rope_dim = 0;
  int64_t pos0 = 0;  // position of row r = pos0 + (r / rows_per_position)·pos_step
  int64_t pos_step = 1;
  int rows_per_position = 1;
  uint8_t* ring = nullptr;  // also write packed row r to ring slot position % capacity
  int64_t ring_capacity = 0;
};

// rms_norm (when ops.norm_w) then rope_rotate (when ops.inv_freq) then kv_quantize of each row,
// in one launch, with the results of those three calls bit for bit; x is not modified (xq may
// alias it). The K=V rows (norm, RoPE, FP8 into the call's rows and the window ring), the index
// keys (norm, RoPE, FP4), the compressed entries and index queries (RoPE, FP4): 2-3 launches
// fewer per layer at decode. Needs dim a multiple of 32 and <= 2048, rows <= INT32_MAX, the
// rope_rotate / kv_quantize conditions, ring_capacity >= 1 with a ring; the ring slots written
// must not be read by the same launch's rows (the caller's rule: docs/kernels.md).
cudaError_t kv_norm_rope_quantize(KvFormat f, const float* x, const KvRowOps& ops, float* xq,
                                  uint8_t* packed, int64_t rows, int64_t dim, cudaStream_t stream);

// Window + sparse attention core (§2.2 steps 4-6, §2.6) = dsv41::window_sparse_attention
// (model/attention/window_sparse_attention.hpp), one softmax over window keys, selected
// compressed entries and the sink, then the inverse RoPE of the output (rope_rotate):
//   q          [T, heads, head_dim] fp32 post-RoPE queries
//   new_packed [T, kv_packed_bytes(kWindowFp8, head_dim)] this call's K=V rows, packed FP8
//              (kv_quantize's `packed`), position pos0 + t
//   ring       [capacity, kv_packed_bytes(kWindowFp8, head_dim)] window ring, position p in slot
//              p % capacity; must hold [max(0, pos0-window+1), pos0); may be null when pos0 == 0
//   compressed [n_entries, kv_packed_bytes(kCompressedFp4, head_dim)] the KV source's entries
//              (contiguous); null allowed when n_entries == 0
//   index      [T, topk] selected entry ids (-1 = none); null when topk == 0. An id >= n_entries
//              makes that token's output rows NaN (the reference throws).
//   sink [heads] fp32, inv_freq [rope_dim/2] the layer's RoPE table, o [T, heads, head_dim] fp32.
//   workspace  split-key partials, window_sparse_attention_workspace_bytes(T, ...) bytes for the
//              full split count; fewer bytes (or 0 / null) give fewer key splits (slower for
//              few tokens, same math). Never read before written.
// head_dim 64, 128, 256 or 512: blocks of (token, 16 heads) on tensor cores (keys exact in bf16,
// q and the probabilities in three bf16 parts, fp32 accumulate: the same bound as below), over
// key splits of 32-key tiles below 32 tokens (workspace as below), one split per block from 32
// tokens on (workspace unused). Other head dims, on CUDA cores:
// Split-key online softmax (flash decoding): keys are decoded to fp32 exactly as the reference;
// scores and sums are fp32 FMA in a different order than the reference's sequential unfused loop,
// so results agree to rounding (docs/kernels.md gives the bound the kernel test checks), and they
// are deterministic for a given (T, heads, window, topk, workspace_bytes). Needs T >= 0,
// T <= INT32_MAX / 64, 1 <= heads, head_dim a multiple of 32 in [32, 512], rope_dim even in
// [2, head_dim], 1 <= window <= capacity, window <= 65536, 0 <= topk <= 65536, pos0 >= 0,
// n_entries >= 0, the pointers above non-null; ~4·(8·head_dim + 32·(head_dim + 4) + 540) bytes of
// shared memory per block (85 KB at head_dim 512: sm_90 and sm_121 both allow it).
size_t window_sparse_attention_workspace_bytes(int64_t T, int heads, int head_dim, int window,
                                               int topk);
cudaError_t window_sparse_attention(const float* q, const uint8_t* new_packed, const uint8_t* ring,
                                    int capacity, const uint8_t* compressed, int64_t n_entries,
                                    const int32_t* index, int topk, const float* sink,
                                    const float* inv_freq, float* o, int64_t T, int heads,
                                    int head_dim, int rope_dim, int window, int64_t pos0,
                                    void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Index top-k (§2.4) = dsv41::select_topk (model/attention/indexer.hpp), exact:
//   scores [T, n] fp32 (-inf = invisible / not a candidate; no NaN), out [T, k] int32: the ids of
//   the min(k, n) best by (score descending, lower id first on exact ties), -inf picks dropped,
//   kept ids ascending, then -1. n == 0 gives all -1 (the reference is not called then).
// Needs T >= 0, 0 <= n <= INT32_MAX, T <= INT32_MAX, k >= 1, out non-null, scores non-null when
// T·n > 0. Radix select, one block per row: rows of up to 8192 entries in registers, longer
// ones read five times.
cudaError_t select_topk(const float* scores, int64_t T, int64_t n, int k, int32_t* out,
                        cudaStream_t stream);

}  // namespace dsv41::kernels
