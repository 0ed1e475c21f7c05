// CPU reference for the quantised GEMV tests: the project's Linear (model/linear.hpp) bound from a
// one-tensor safetensors checkpoint written in the released storage format, so the reference
// reads exactly the bytes the kernel reads.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "config/model_config.hpp"
#include "core/thread_pool.hpp"
#include "loader/checkpoint.hpp"
#include "loader/safetensors.hpp"
#include "model/linear.hpp"
#include "unit/base/temp_dir.hpp"

namespace dsv41::test {

// The input rounding of the tensor-core GEMMs (kernels/include/dsv41k/gemm_x.hpp): x as the sum of
// its first `parts` bf16 parts (hi = bf16(x), mid = bf16(x − hi), ...; round to nearest even).
// parts 3 keeps x as it is (the three parts carry all 24 significant bits, the remainder is
// <= 2^-27·|x|, far inside the GEMV bound).
inline float bf16_round(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}
inline std::vector<float> bf16_parts(std::vector<float> x, int parts) {
  if (parts >= 3) return x;
  for (float& v : x) {
    const float hi = bf16_round(v);
    v = parts == 1 ? hi : hi + bf16_round(v - hi);
  }
  return x;
}

struct GemvReference {
  std::vector<float> y;         // [rows, out] = Linear::forward
  std::vector<double> abs_dot;  // [rows, out] = Σ_k |W[o,k] · x[t,k]|: rounding-error scale
};

// w/scale in the stored layout (FP8: F8_E4M3 [out, in] + E8M0 [ceil(out/32), ceil(in/32)];
// FP4: I8 [out, in/2] + E8M0 [out, in/32]).
inline GemvReference gemv_reference(bool fp4, const std::vector<uint8_t>& w,
                                    const std::vector<uint8_t>& scale, const std::vector<float>& x,
                                    int rows, int64_t out, int64_t in) {
  TempDir dir;
  const std::vector<int64_t> wshape =
      fp4 ? std::vector<int64_t>{out, in / 2} : std::vector<int64_t>{out, in};
  const std::vector<int64_t> sshape = fp4 ? std::vector<int64_t>{out, in / 32}
                                          : std::vector<int64_t>{(out + 31) / 32, (in + 31) / 32};
  write_safetensors(dir.file("model.safetensors"),
                    {{"l.weight", fp4 ? DType::kI8 : DType::kF8E4M3, wshape, w},
                     {"l.scale", DType::kF8E8M0, sshape, scale}});
  const std::unique_ptr<Checkpoint> ck = Checkpoint::open(dir.path());
  const Linear lin = Linear::bind(*ck, "l", out, in, QuantizationConfig{});

  static ThreadPool pool;
  GemvReference ref;
  ref.y.resize(static_cast<size_t>(rows) * out);
  lin.forward(x.data(), rows, ref.y.data(), &pool);
  ref.abs_dot.resize(ref.y.size());
  pool.parallel_for(static_cast<size_t>(out), [&](size_t b, size_t e) {
    std::vector<float> row(in);
    for (size_t o = b; o < e; ++o) {
      lin.dequantize_row(static_cast<int64_t>(o), row.data());
      for (int t = 0; t < rows; ++t) {
        double s = 0;
        for (int64_t k = 0; k < in; ++k) s += std::fabs(double(row[k]) * x[t * in + k]);
        ref.abs_dot[t * out + o] = s;
      }
    }
  });
  return ref;
}

}  // namespace dsv41::test
