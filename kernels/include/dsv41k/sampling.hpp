// Launcher of the token sampler on the device: the chain of dsv41::Sampler (docs/sampling.md
// steps 1-8, libdsv41/src/sampling/) on rows of logits already in device memory, so a decode step
// downloads one small result per row instead of the 517 KB of logits. The RNG stays on the host:
// the caller passes each row's 53-bit uniform (Sampler's xoshiro256** draw). Same launcher rules
// as launchers.hpp: raw device pointers, a caller-owned workspace, no allocation, no host sync
// (graph-capturable); invalid arguments return cudaErrorInvalidValue before any launch, else
// cudaGetLastError() after the launches. See docs/kernels.md "Sampling".
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsv41::kernels {

constexpr int kSampleMaxRows = 16;  // DSpark verify rows of one step

// Per-row chain parameters (host-validated SamplerParams; the kernel does not re-check them).
struct SampleRowParams {
  double uniform = 0.0;      // [0, 1): the draw's u; ignored when greedy
  float temperature = 1.0f;  // > 0 when not greedy; logit' = (logit - max) / temperature
  float min_p = 0.0f;        // [0, 1]; 0 = off
  float top_p = 1.0f;        // (0, 1]; 1 = off
  int32_t top_k = 0;         // <= 0 or >= vocab = off
  int32_t greedy = 0;        // 1: argmax (lowest id on ties) after steps 1-2, nothing drawn
  int32_t pad = 0;
};

// Flags of a SampleAdjust, applied in this order (= the CPU's logit_bias then apply_penalties):
constexpr uint32_t kAdjustBias = 1;     // l = l + bias
constexpr uint32_t kAdjustRepeat = 2;   // l = l > 0 ? l / repetition : l * repetition
constexpr uint32_t kAdjustPenalty = 4;  // l = l - frequency_term; l = l - presence
// One listed token of a row: fp32 IEEE operations, unfused, so the result equals the CPU's.
struct SampleAdjust {
  int32_t id = 0;  // [0, vocab); each id at most once per row
  uint32_t flags = 0;
  float bias = 0.0f;
  float repetition = 1.0f;
  float frequency_term = 0.0f;  // frequency * float(count), rounded to fp32 by the host
  float presence = 0.0f;
};

// Row status: 0 ok, else the CPU Sampler's kInvalidArgument case (count / first filled as named).
enum SampleStatus : int32_t {
  kSampleOk = 0,
  kSampleNan = 1,          // count = number of NaN logits, first = lowest such id
  kSamplePosInf = 2,       // count = number of +inf logits, first = lowest such id
  kSampleAllNegInf = 3,    // every logit -inf (after the mask)
  kSampleNothingLeft = 4,  // every logit -inf after logit_bias and penalties
  kSampleOverflow = 5,     // a logit became +inf after logit_bias / penalties; first = its id
  // Not a Sampler outcome: the draw of a valid row found no token with weight (a kernel fault;
  // the host reports it as kInternal instead of returning token -1).
  kSampleNoCandidate = 6,
};

struct SampleResult {
  int32_t token = -1;  // the sampled id when status == kSampleOk
  int32_t status = 0;  // SampleStatus
  int32_t count = 0;
  int32_t first = -1;
};

// Bytes of workspace sample_tokens needs for `rows` rows of `vocab` logits (12·vocab + 256 per
// row: the transformed fp32 logits and their fp64 weights). 0 for bad sizes.
size_t sample_tokens_workspace_bytes(int64_t rows, int64_t vocab);

// For each row r < rows, the token Sampler::sample would return for these logits:
//   logits          [rows, vocab] fp32, row stride `vocab`
//   params          [rows] SampleRowParams
//   adjust          [adjust_offsets[rows]] SampleAdjust; row r owns
//                   [adjust_offsets[r], adjust_offsets[r+1]); may be null with null offsets
//   adjust_offsets  [rows + 1] int32, ascending from 0, or null (no adjustments)
//   allowed         [rows, ceil(vocab / 32)] uint32 bitmask (bit i % 32 of word i / 32 = id i
//                   allowed) or null: applied first like ToolCallConstraint::mask (an allowed
//                   -inf logit becomes 0, a disallowed one -inf)
//   out             [rows] SampleResult
// Needs 0 <= rows <= kSampleMaxRows, 1 <= vocab <= 2^31 - 1, non-null logits/params/out when
// rows > 0, adjust and adjust_offsets both null or both non-null, workspace 256-byte aligned and
// at least sample_tokens_workspace_bytes(rows, vocab). Four launches on `stream`.
// Exactness: steps 1-7 use the CPU's fp32 operations (bit-equal work logits, min_p through the
// same fp64 exp comparison, top_k exact); top_p's cut and the draw use fp64 weights summed in
// another order than the CPU's, so the token differs only when u·total or the top_p remainder
// lies within ~1e-13 (relative) of a boundary.
cudaError_t sample_tokens(const float* logits, int64_t rows, int64_t vocab,
                          const SampleRowParams* params, const SampleAdjust* adjust,
                          const int32_t* adjust_offsets, const uint32_t* allowed, SampleResult* out,
                          void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace dsv41::kernels
