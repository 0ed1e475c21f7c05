// The EXL3 routed-expert banks of a synthetic Spark-layout checkpoint (SyntheticExl3): the K of
// each expert, the bank files' tensor lists and the allocation plan (docs/formats/exl3.md "Spark
// banks and the allocation plan", spec exl3-format.md §4).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "synthetic/synthetic_checkpoint.hpp"

namespace dsv41::synth {

// Experts at K = 2, 3, 5 among n_experts: minimises |mean bits - x.mean_bpw|, then
// |n5 - x.k5_fraction x n_experts|; every count >= 1 when n_experts >= 3. 32 experts: 17 / 10 / 5
// (2.781 bpw); 384: 204 / 122 / 58 (2.771); 4: 2 / 1 / 1 (3.0, the nearest with all three K).
std::array<int, 3> exl3_k_counts(int n_experts, const SyntheticExl3& x);
// K of every expert of `layer`: the counts above placed by a Fisher-Yates shuffle seeded by the
// layer alone, so routing meets every K and the layout does not depend on the weight seed.
std::vector<int> exl3_expert_k(const SyntheticGeometry& g, const SyntheticExl3& x, int layer);
// Trellis bits per weight over all layers' experts (every expert has the same weight count).
double exl3_mean_bpw(const SyntheticGeometry& g, const SyntheticExl3& x);

// |svh|: with suh = ±1 and uniform random trellis states, W = diag(suh)·H·Ŵ·H·diag(svh) has
// element RMS = RMS(Ŵ) x |svh| (H orthonormal); this makes it 1/sqrt(in), the FP4 experts' RMS.
// RMS(Ŵ) is that of the MUL1 codebook over its 65,536 states (exl3::codebook_lut_f32).
double exl3_svh_scale(int64_t in_features);

struct BankFile {
  std::string rel_path;  // under the checkpoint directory, e.g. "exl3/qn/K5/L03.safetensors"
  std::vector<SyntheticTensor> tensors;
};
// One file per (layer, K present), layer-major, K ascending; experts ascending, each w1, w3, w2
// (gate, up, down) as `layers.L.ffn.experts.E.wX.{trellis I16 [k/16, n/16, 16K] random bits,
// suh F16 [k] ±1, svh F16 [n] ±exl3_svh_scale(in), mul1 I32 [] = the MUL1 marker}` with
// (k, n) = (pad128(in), pad128(out)) as exl3::ExpertStore expects (tiny: 64 -> 128).
std::vector<BankFile> exl3_bank_files(const SyntheticGeometry& g, const SyntheticExl3& x);
// Data bytes of every bank file (no headers).
uint64_t exl3_bank_bytes(const SyntheticGeometry& g, const SyntheticExl3& x);
// {"layers": {"<L>": most common K}, "expert_state": {"<L>": {"<E>": other K}}, "qdir": "qn"}.
std::string exl3_plan_json(const SyntheticGeometry& g, const SyntheticExl3& x);

}  // namespace dsv41::synth
