// One routed-expert projection (w1 gate / w3 up / w2 down) applied on the fly, whatever its storage
// (EXL3 bank or the release's FP4); the model's whole-expert dsv41::ExpertProvider (model/moe.hpp)
// is built on top of it (see docs/formats/exl3.md "Integration"). Orientation: the model's
// convention is nn.Linear, weight W_model [out, in] and y = x·W_modelᵀ; EXL3 stores W_exl3 =
// W_modelᵀ as (in, out) and computes y = x·W_exl3. Both are the same y here: x [rows, in] row-major
// -> y [rows, out] row-major, where for gate/up (w1/w3) in = hidden, out = inter and for down (w2)
// in = inter, out = hidden.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exl3/expert_bank.hpp"

namespace dsv41 {
class ThreadPool;
}

namespace dsv41::exl3 {

struct ExpertShape {
  int64_t in = 0;
  int64_t out = 0;
};

class ProjectionProvider {
 public:
  virtual ~ProjectionProvider() = default;
  // Whether (layer, expert) can be applied by this provider (e.g. on this TP rank).
  virtual bool has(int layer, int expert) const = 0;
  // Throws kNotFound naming layer/expert/projection when !has(layer, expert).
  virtual ExpertShape shape(int layer, int expert, ExpertProj proj) const = 0;
  // y[rows, out] = x[rows, in] · W_modelᵀ, decoding weights on the fly (no expert is ever
  // materialised). x and y must not overlap. `pool` (optional) splits the output columns.
  virtual void linear(int layer, int expert, ExpertProj proj, const float* x, size_t rows, float* y,
                      ThreadPool* pool = nullptr) const = 0;
};

}  // namespace dsv41::exl3
