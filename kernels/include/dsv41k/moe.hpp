// Launchers of the routed-MoE ops (spec model-architecture.md §4), mirroring the CPU reference
// model/moe.cpp (route, moe_forward, swiglu_activate): raw device pointers, sizes, a stream; no
// allocation, no workspace (every intermediate is an output the caller owns). Invalid arguments
// return cudaErrorInvalidValue before anything is launched, else cudaGetLastError() after the
// launch. No host syncs: counts that only the device knows (slots of this rank) are read by the
// kernels from the permutation's `offsets`, so a decode step can be captured in a CUDA graph.
// Layouts row-major, fp32 activations. Data flow of one MoE sublayer (docs/kernels.md):
//   logits [T, E] (dense GEMV) -> moe_route -> ids, weights [T, k]
//   -> moe_permute -> counts, offsets, slot_token, slot_weight, inv -> moe_gather -> xs [slots, D]
//   -> moe_expert_descriptors (w1, w3, w2) -> moe_grouped_fp4_gemv (gate+up) -> g, u
//   -> moe_swiglu (route weight) -> h -> moe_grouped_fp4_gemv (down) -> ys [slots, D]
//   -> moe_combine with the shared expert's output -> y [T, D]
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "dsv41k/gemm_x.hpp"

namespace dsv41::kernels {

// Most routed experts (n_routed_experts, or a rank's local range) and the largest top-k the MoE
// kernels take (released: 384 and 6).
inline constexpr int kMoeMaxExperts = 1024;
inline constexpr int kMoeMaxTopK = 64;
// Most activation rows of one grouped-GEMV descriptor (= kGemvMaxRows of launchers.hpp).
inline constexpr int kMoeGemvMaxRows = 16;

// §4 router on precomputed gate logits (= dsv41::route after its fp64 dot products, which the
// caller's gate GEMV replaces):
//   logits        [T, E] fp32 = x · gateᵀ
//   bias, bias_vl [E] fp32; bias_vl is used at positions with image_flags[t] != 0
//   image_flags   [T] uint8 or null (then bias_vl may be null)
//   ids           [T, k] int32, descending biased score, ties to the lower expert index
//   weights       [T, k] fp32: score / (Σ_k score + 1e-20) (norm_topk_prob) × routed_scaling
//   biased_scores [T, E] fp32 or null: sqrtsoftplus(logit / gate_temp) + bias
// Same fp32 op sequence as route(): IEEE division by gate_temp, softplus threshold 20, exp and
// log1p through fp64 rounded to fp32 (the correctly rounded fp32 result except within ~2^-29 ulp
// of a rounding midpoint; glibc's expf/log1pf differ from that by at most 1 ulp), IEEE sqrt and
// add, the weight sum in top-k order. Needs T >= 0, 1 <= k <= E <= kMoeMaxExperts,
// k <= kMoeMaxTopK, gate_temp finite and > 0, logits/bias/ids/weights non-null, bias_vl non-null
// when image_flags is. Logits must not be NaN (the CPU order is undefined there).
cudaError_t moe_route(const float* logits, const float* bias, const float* bias_vl,
                      const uint8_t* image_flags, int32_t* ids, float* weights,
                      float* biased_scores, int64_t T, int E, int k, float gate_temp,
                      bool norm_topk_prob, float routed_scaling_factor, cudaStream_t stream);

// Token permutation for this rank's experts [expert_begin, expert_end) (n_local = end - begin),
// in moe_forward's order: expert ascending, within an expert token ascending.
//   ids          [T, k] int32 (moe_route); ids outside the range are skipped (other ranks)
//   weights      [T, k] fp32 or null; slot_weight [T·k] fp32 or null (both or neither)
//   counts       [n_local] int32: rows routed to local expert e - expert_begin
//   offsets      [n_local + 1] int32: exclusive prefix sum; offsets[n_local] = slots used
//   slot_token   [T·k] int32: token of slot s < offsets[n_local] (entries past it untouched)
//   slot_weight  [T·k]: weights[t, i] of that slot
//   inv          [T, k] int32: slot of (t, i), -1 when ids[t, i] is not local
// One block; deterministic (no order-dependent atomics). Needs T >= 0, 1 <= k <= kMoeMaxTopK,
// 0 <= expert_begin < expert_end, n_local <= kMoeMaxExperts, T·k < 2^31, non-null outputs.
cudaError_t moe_permute(const int32_t* ids, const float* weights, int64_t T, int k,
                        int expert_begin, int expert_end, int32_t* counts, int32_t* offsets,
                        int32_t* slot_token, float* slot_weight, int32_t* inv, cudaStream_t stream);

// xs[s, :] = x[slot_token[s], :] for s < *n_slots (device int32, e.g. offsets + n_local), s <
// capacity. x [T, D], xs [capacity, D]; rows past *n_slots are untouched. Needs capacity >= 0,
// D >= 1, non-null pointers, xs not aliasing x.
cudaError_t moe_gather(const float* x, const int32_t* slot_token, const int32_t* n_slots, float* xs,
                       int64_t capacity, int64_t D, cudaStream_t stream);

// One matrix of a grouped FP4 GEMV: y[y_row + r, :] = x[x_row + r, :] · Wᵀ for r < rows.
//   w      I8 [out, in/2] E2M1 pairs (even column = low nibble), 16-byte aligned
//   scale  F8_E8M0 [out, in/32]
// rows 0 skips the descriptor; rows are processed only up to the call's max_rows.
struct MoeGemvDesc {
  const uint8_t* w;
  const uint8_t* scale;
  int32_t x_row, y_row, rows;
};

// Descriptors needed for T·k slots over n_local experts with tiles of <= kMoeGemvMaxRows rows:
// Σ_e ceil(c_e/16) <= min(n_local, T·k) + floor(T·k / 16).
int64_t moe_descriptor_capacity(int64_t T, int k, int n_local);

// From the permutation's counts/offsets, the descriptors of every local expert in ascending
// order, each bucket cut into tiles of <= kMoeGemvMaxRows rows: x_row = y_row - y_row_shift =
// offsets[e] + 16·j; w_table/scale_table [n_local] device arrays of per-expert pointers (e.g.
// every expert's w1). desc [capacity]; entries past the used ones get rows = 0. Needs n_local in
// 1..kMoeMaxExperts, capacity >= 1 (moe_descriptor_capacity), y_row_shift >= 0, non-null
// pointers. Tiles past capacity are dropped (a too-small capacity is the caller's bug). A null
// w_table[e] gives expert e's tiles rows = 0 (skipped by every grouped kernel): a layer whose
// experts come in two formats (EXL3 banks and release FP4, spec exl3-format.md §4.2) builds one
// table per format from the same permutation, each null where the other format computes.
cudaError_t moe_expert_descriptors(const int32_t* counts, const int32_t* offsets, int n_local,
                                   const uint8_t* const* w_table, const uint8_t* const* scale_table,
                                   int32_t y_row_shift, MoeGemvDesc* desc, int64_t capacity,
                                   cudaStream_t stream);

// The same with tiles of <= tile_rows rows (moe_expert_descriptors = tile_rows 16; the grouped
// GEMM below takes 64), and the capacity it needs: min(n_local, T·k) + floor(T·k / tile_rows).
int64_t moe_tile_capacity(int64_t T, int k, int n_local, int tile_rows);
cudaError_t moe_expert_tiles(const int32_t* counts, const int32_t* offsets, int n_local,
                             const uint8_t* const* w_table, const uint8_t* const* scale_table,
                             int32_t y_row_shift, int tile_rows, MoeGemvDesc* desc,
                             int64_t capacity, cudaStream_t stream);

// One descriptor table of moe_expert_tile_sets: the per-expert pointer tables, the y row shift and
// the output array [capacity].
struct MoeTileSet {
  const uint8_t* const* w_table;
  const uint8_t* const* scale_table;
  int32_t y_row_shift;
  MoeGemvDesc* desc;
};
inline constexpr int kMoeMaxTileSets = 6;  // w1, w3, w2 of FP4 and of EXL3 experts

// moe_expert_tiles for n_sets (1..kMoeMaxTileSets) tables of the same permutation in one launch
// (sets: a host array, read before the call returns), e.g. w1, w3 and w2 of a layer. Each set's
// desc gets exactly what moe_expert_tiles would write; the sets may share w_table but not desc.
cudaError_t moe_expert_tile_sets(const int32_t* counts, const int32_t* offsets, int n_local,
                                 const MoeTileSet* sets, int n_sets, int tile_rows,
                                 int64_t capacity, cudaStream_t stream);

// moe_route, moe_permute and moe_expert_tile_sets of a decode or verify step in one launch (one
// block, a thread per local expert): the same outputs bit for bit (the same device code), with
// two launch boundaries fewer per layer on the step's critical path (each was a few us of pure
// latency at decode). The router's biased_scores output is not produced. Needs
// 1 <= T <= kMoeDispatchMaxTokens, expert_end - expert_begin <= kMoeDispatchMaxLocalExperts and
// the three launchers' other conditions (route as moe_route's arguments, slot_weight non-null).
inline constexpr int64_t kMoeDispatchMaxTokens = 16;
inline constexpr int kMoeDispatchMaxLocalExperts = 512;
struct MoeRouteArgs {
  const float* logits = nullptr;  // [T, E]
  const float* bias = nullptr;    // [E]
  const float* bias_vl = nullptr;
  const uint8_t* image_flags = nullptr;
  int E = 0, k = 0;
  float gate_temp = 1.0f;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
};
cudaError_t moe_route_dispatch(const MoeRouteArgs& route, int64_t T, int32_t* ids, float* weights,
                               int expert_begin, int expert_end, int32_t* counts, int32_t* offsets,
                               int32_t* slot_token, float* slot_weight, int32_t* inv,
                               const MoeTileSet* sets, int n_sets, int tile_rows, int64_t capacity,
                               cudaStream_t stream);

// One EXL3 expert projection in device memory (spec exl3-format.md §1.2; exl3::Exl3Tensor's
// fields): what the w entries of an EXL3 descriptor table point at. MUL1 codebook.
struct Exl3MoeMatrix {
  const uint8_t* trellis;  // int16 [k/16][n/16][16K], 16-byte aligned
  const uint16_t* suh;     // fp16 [k], 8-byte aligned
  const uint16_t* svh;     // fp16 [n], 8-byte aligned
  int32_t K;               // bits per weight, 2..kMoeExl3MaxK
  int32_t reserved;
};
inline constexpr int kMoeExl3MaxK = 5;

// For every descriptor d < n_desc whose w is non-null (a device Exl3MoeMatrix) with rows > 0
// (<= kMoeGemvMaxRows; tiles of 16 rows from moe_expert_tiles): the EXL3 GEMV of exl3_gemv,
//   y[y_row + r, :y_cols] = (had128(had128(x̃ ⊙ suh) · Ŵ) ⊙ svh)[:y_cols],
//   x̃ = x[x_row + r, :x_cols] zero-extended to k
// with Ŵ [k, n] decoded from the record's trellis at its own K (one launch for a layer's mixed
// K), MUL1 codebook, fp32 in and out, the same per-block arithmetic as exl3_gemv with one k split
// (accuracy: docs/kernels.md). x rows are x_cols apart, y rows y_cols apart: the model's
// projection (in, out) inside the bank's (pad128(in), pad128(out)) matrix (spec §2.1). max_rows
// (1..16) is the largest descriptor rows, max_k (2..kMoeExl3MaxK) the largest record K (sizes
// shared memory; a record with another K is skipped, its rows untouched). Needs 1 <= n_desc <=
// 65535, k and n multiples of 128 (<= 2^24), x_cols in [4, k] and y_cols in [4, n] multiples of
// 4, x and y 16-byte aligned and not aliasing, |xh| < 2^74.
cudaError_t moe_grouped_exl3_gemv(const MoeGemvDesc* desc, int n_desc, int max_rows, int max_k,
                                  const float* x, int64_t x_cols, float* y, int64_t y_cols,
                                  int64_t k, int64_t n, cudaStream_t stream);

// The same product for prefill tiles of up to kMoeGemmTileRows rows (descriptors from
// moe_expert_tiles with tile_rows = kMoeGemmTileRows): each weight is decoded once per 64 rows
// instead of once per 16. Same arguments and rules as moe_grouped_exl3_gemv without max_rows;
// descriptors with more than 64 rows compute their first 64. Same per-output arithmetic and bound.
cudaError_t moe_grouped_exl3_gemm(const MoeGemvDesc* desc, int n_desc, int max_k, const float* x,
                                  int64_t x_cols, float* y, int64_t y_cols, int64_t k, int64_t n,
                                  cudaStream_t stream);

// Rows per descriptor of moe_grouped_fp4_gemm (its activation tile).
inline constexpr int kMoeGemmTileRows = 64;

// For every descriptor d < n_desc with rows > 0 (<= kMoeGemmTileRows; from moe_expert_tiles with
// tile_rows = kMoeGemmTileRows): fp4_expert_gemm on x rows [x_row, x_row + rows) into y rows
// [y_row, ...), one launch (tensor cores, x as `xp` says: GemmX in launchers.hpp). For prefill
// chunks, where buckets hold tens to hundreds of rows. Needs 1 <= n_desc <= 65535, out >= 1,
// in % 32 == 0, in <= 2^28, desc/x/y non-null, x and y 16-byte aligned, not aliasing, xp one of
// the three values.
cudaError_t moe_grouped_fp4_gemm(const MoeGemvDesc* desc, int n_desc, const float* x, float* y,
                                 int64_t out, int64_t in, GemmX xp, cudaStream_t stream);

// For every descriptor d < n_desc (device array): the FP4 release-format GEMV of
// fp4_expert_gemv on x rows [x_row, x_row + rows) into y rows [y_row, ...), fp32 accumulation in
// the same order as fp4_expert_gemv at the same (T, R, k split); one launch for all. x [*, in]
// and y [*, out] are the shared bases (16-byte aligned, not aliasing). max_rows (1..16) is the
// largest descriptor rows (picks the kernel instance). Needs 1 <= n_desc <= 65535, out >= 1,
// in % 32 == 0, in <= 2^28, desc/x/y non-null.
cudaError_t moe_grouped_fp4_gemv(const MoeGemvDesc* desc, int n_desc, int max_rows, const float* x,
                                 float* y, int64_t out, int64_t in, cudaStream_t stream);

// moe_gather + moe_grouped_fp4_gemv in one launch: descriptor row x_row + t reads x row
// slot_token[x_row + t] (x [tokens, in], the layer's normalised activations) as the kernel stages
// x into shared memory, instead of row x_row + t of the gathered copy. Same bits as the two
// launches (the same values staged). Only where every kernel instance max_rows can pick stages x:
// moe_grouped_fp4_gemv_gathered_supported(max_rows, in) (e.g. max_rows <= 2 at in = 5120), else
// cudaErrorInvalidValue; slot_token non-null, the other rules as moe_grouped_fp4_gemv.
bool moe_grouped_fp4_gemv_gathered_supported(int max_rows, int64_t in);
cudaError_t moe_grouped_fp4_gemv_gathered(const MoeGemvDesc* desc, int n_desc, int max_rows,
                                          const float* x, const int32_t* slot_token, float* y,
                                          int64_t out, int64_t in, cudaStream_t stream);

// Tensor-core form of moe_grouped_fp4_gemv (moe/moe_grouped_fp4_gemv_tc.cu): codes as exact f16
// through mma.sync, x as three f16 parts per (row, 32-column block) with a power-of-two factor
// (linear/gemv_tc.cuh), fp32 accumulation; the same per-element bound, another summation order
// (deterministic for a shape). Two launches: the split of x rows [0, x_rows) (every descriptor's
// rows must lie there) into `workspace`, then the product. Needs the moe_grouped_fp4_gemv rules,
// in % 128 == 0, 1 <= x_rows <= 2^24, x and workspace 16-byte aligned, workspace_bytes >=
// moe_grouped_fp4_gemv_tc_workspace_bytes(x_rows, in), descriptor scale and weight pointers
// 4-byte aligned.
size_t moe_grouped_fp4_gemv_tc_workspace_bytes(int64_t x_rows, int64_t in);
cudaError_t moe_grouped_fp4_gemv_tc(const MoeGemvDesc* desc, int n_desc, int max_rows,
                                    const float* x, int64_t x_rows, float* y, int64_t out,
                                    int64_t in, void* workspace, size_t workspace_bytes,
                                    cudaStream_t stream);

// moe_grouped_fp4_gemv_tc for decode steps (moe/moe_grouped_fp4_gemv_tc_decode.cu): one launch,
// no workspace: each block splits the descriptor's x rows (one power-of-two factor per row, three
// f16 parts) into shared memory. Descriptor row x_row + n reads x row slot_token[x_row + n]
// (slot_token non-null: x [tokens, in], the gather of moe_grouped_fp4_gemv_gathered folded in) or
// x row x_row + n. Rows whose split exceeds the 88 KB shared-memory budget (3+ at in = 5120, 7+
// at 2304) are staged in chunks of k. Needs moe_grouped_fp4_gemv_tc_decode_supported(max_rows,
// in) (1 <= max_rows <= 8, in % 128 == 0), desc/x/y non-null, x 16-byte aligned and not y, 1 <=
// n_desc <= 65535, out >= 1, descriptor rows <= max_rows, weight pointers 16-byte and scale
// pointers 4-byte aligned; else cudaErrorInvalidValue.
bool moe_grouped_fp4_gemv_tc_decode_supported(int max_rows, int64_t in);
cudaError_t moe_grouped_fp4_gemv_tc_decode(const MoeGemvDesc* desc, int n_desc, int max_rows,
                                           const float* x, const int32_t* slot_token, float* y,
                                           int64_t out, int64_t in, cudaStream_t stream);

// §4 activation in place (= dsv41::swiglu_activate): g[r, i] = route_w[r] · SiLU(min(g, limit))
// · clamp(u, ±limit) for r < min(n, *n_rows) (n_rows device int32 or null = n). route_w [n] or
// null (weight 1); limit <= 0: no clamp. The fp32 op sequence of the CPU with exp through fp64
// (bit-exact unless glibc's expf misrounds; bound in docs/kernels.md). Needs n >= 0, inter >= 1,
// g/u non-null, u not aliasing g.
cudaError_t moe_swiglu(float* g, const float* u, const float* route_w, const int32_t* n_rows,
                       int64_t n, int64_t inter, float limit, cudaStream_t stream);

// Weighted combine (= the end of dsv41::moe_forward): y[t] = (Σ over the token's local entries in
// ascending expert id of ys[inv[t, i]], from 0.0f) + shared[t], each add rounded to fp32.
//   ys [slots, D] (route weights already applied by moe_swiglu), ids/inv [T, k] (moe_route,
//   moe_permute), shared [T, D] or null (then y is the routed sum), y [T, D] (may alias shared).
// Needs T >= 0, 1 <= k <= kMoeMaxTopK, D >= 1, ys/ids/inv/y non-null, ys not aliasing y.
cudaError_t moe_combine(const float* ys, const int32_t* ids, const int32_t* inv,
                        const float* shared, float* y, int64_t T, int k, int64_t D,
                        cudaStream_t stream);

}  // namespace dsv41::kernels
