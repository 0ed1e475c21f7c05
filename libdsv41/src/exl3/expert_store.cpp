// Expert dispatch: EXL3 bank first, release FP4 otherwise (spec exl3-format.md §4.1).
#include "exl3/expert_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/check.hpp"
#include "core/thread_pool.hpp"
#include "exl3/exl3_linear.hpp"
#include "loader/checkpoint.hpp"
#include "quant/dtype.hpp"

namespace dsv41::exl3 {

namespace {

constexpr int64_t kFp4Block = 32;  // one E8M0 scale per row per 32 input columns

struct Fp4Weight {
  TensorView weight;  // I8 [out, in/2], even column = low nibble
  TensorView scale;   // F8_E8M0 [out, in/32]
  int64_t in = 0, out = 0;
};

Fp4Weight fp4_weight(const Checkpoint& ckpt, int layer, int expert, ExpertProj proj) {
  const std::string base =
      fmt::format("layers.{}.ffn.experts.{}.{}", layer, expert, proj_key(proj));
  Fp4Weight w;
  w.weight = ckpt.get(base + ".weight");
  DSV41_CHECK(w.weight.dtype() == DType::kI8 && w.weight.shape().size() == 2, kCorruptFile,
              "checkpoint {}: '{}.weight' must be I8 [out, in/2] (packed FP4), found {} {}",
              ckpt.dir(), base, dtype_name(w.weight.dtype()), shape_string(w.weight.shape()));
  w.out = w.weight.shape()[0];
  w.in = 2 * w.weight.shape()[1];
  DSV41_CHECK(w.in % kFp4Block == 0, kCorruptFile,
              "checkpoint {}: '{}.weight' has {} input columns, not a multiple of 32", ckpt.dir(),
              base, w.in);
  w.scale = ckpt.expect(base + ".scale", DType::kF8E8M0, {w.out, w.in / kFp4Block});
  return w;
}

// y[r, o] = Σ_i x[r, i] · W[o, i], dequantising one weight row at a time.
void fp4_rows(const Fp4Weight& w, const float* x, size_t rows, float* y, size_t o_begin,
              size_t o_end) {
  const size_t in = static_cast<size_t>(w.in), out = static_cast<size_t>(w.out);
  std::vector<float> row(in);
  for (size_t o = o_begin; o < o_end; ++o) {
    dequant_fp4_rowblocked(w.weight.data + o * in / 2, w.scale.data + o * in / kFp4Block, 1, w.in,
                           kFp4Block, row.data());
    for (size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * in;
      float acc = 0;
      for (size_t i = 0; i < in; ++i) acc += xr[i] * row[i];
      y[r * out + o] = acc;
    }
  }
}

}  // namespace

ExpertStore::ExpertStore(const ExpertBank* bank, const Checkpoint* native, ExpertDims model)
    : bank_(bank), native_(native), model_(model) {
  if (!bank_ || model_.hidden == 0) return;
  DSV41_CHECK(model_.hidden > 0 && model_.inter > 0, kInvalidArgument,
              "ExpertStore: model dims hidden {} / inter {} must both be set", model_.hidden,
              model_.inter);
  const int64_t hidden = pad128(model_.hidden), inter = pad128(model_.inter);
  DSV41_CHECK(bank_->expert_count() == 0 || (bank_->hidden() == hidden && bank_->inter() == inter),
              kCorruptFile,
              "{}: bank experts are (hidden {}, inter {}) but the model needs hidden_size {} and "
              "moe_intermediate_size {} (stored padded to 128: hidden {}, inter {})",
              bank_->plan().path, bank_->hidden(), bank_->inter(), model_.hidden, model_.inter,
              hidden, inter);
}

ExpertShape ExpertStore::model_shape(ExpertProj proj) const {
  if (proj == ExpertProj::kDown) return {model_.inter, model_.hidden};
  return {model_.hidden, model_.inter};
}

bool ExpertStore::in_bank_range(int expert) const {
  return !bank_ || bank_->range().contains(expert);
}

const BankExpert* ExpertStore::exl3(int layer, int expert) const {
  return bank_ ? bank_->find(layer, expert) : nullptr;
}

bool ExpertStore::has(int layer, int expert) const {
  if (!in_bank_range(expert)) return false;
  if (exl3(layer, expert)) return true;
  return native_ && native_->has(fmt::format("layers.{}.ffn.experts.{}.w1.weight", layer, expert));
}

ExpertShape ExpertStore::shape(int layer, int expert, ExpertProj proj) const {
  DSV41_CHECK(has(layer, expert), kNotFound,
              "routed expert {} of layer {} is neither in the EXL3 banks (for this rank) nor in "
              "the native checkpoint",
              expert, layer);
  if (const BankExpert* e = exl3(layer, expert)) {
    if (model_.hidden) return model_shape(proj);
    const Exl3Tensor& t = e->proj[static_cast<int>(proj)];
    return {t.k, t.n};
  }
  const Fp4Weight w = fp4_weight(*native_, layer, expert, proj);
  return {w.in, w.out};
}

void ExpertStore::linear(int layer, int expert, ExpertProj proj, const float* x, size_t rows,
                         float* y, ThreadPool* pool) const {
  DSV41_CHECK(has(layer, expert), kNotFound,
              "routed expert {} of layer {} ({}) is neither in the EXL3 banks (for this rank) nor "
              "in the native checkpoint",
              expert, layer, proj_key(proj));
  if (const BankExpert* e = exl3(layer, expert)) {
    // EXL3's W is (in, out), so x·W_exl3 is already the model's x·W_modelᵀ.
    const Exl3Tensor& t = e->proj[static_cast<int>(proj)];
    const ExpertShape s = model_.hidden ? model_shape(proj) : ExpertShape{t.k, t.n};
    if (s.in == t.k && s.out == t.n) {
      matmul(t, x, rows, y, pool);
      return;
    }
    // Padded storage (§2.1): x [rows, in] -> [rows, k] with zeros, y [rows, n] -> [rows, out].
    const size_t in = static_cast<size_t>(s.in), out = static_cast<size_t>(s.out);
    const size_t k = static_cast<size_t>(t.k), n = static_cast<size_t>(t.n);
    std::vector<float> xp(rows * k, 0.0f), yp(rows * n);
    for (size_t r = 0; r < rows; ++r) std::copy_n(x + r * in, in, xp.data() + r * k);
    matmul(t, xp.data(), rows, yp.data(), pool);
    for (size_t r = 0; r < rows; ++r) std::copy_n(yp.data() + r * n, out, y + r * out);
    return;
  }
  const Fp4Weight w = fp4_weight(*native_, layer, expert, proj);
  const size_t out = static_cast<size_t>(w.out);
  if (pool && pool->size() > 1) {
    pool->parallel_for(out, [&](size_t b, size_t e) { fp4_rows(w, x, rows, y, b, e); });
  } else {
    fp4_rows(w, x, rows, y, 0, out);
  }
}

}  // namespace dsv41::exl3
