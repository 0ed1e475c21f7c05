// Linear: binding checks and the row-dequantising fp32 matmul of the CPU reference.
#include "model/linear.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.hpp"
#include "core/thread_pool.hpp"

namespace dsv41 {

Linear Linear::bind(const Checkpoint& ck, const std::string& prefix, int64_t out, int64_t in,
                    const QuantizationConfig& q) {
  Linear l;
  l.out_ = out;
  l.in_ = in;
  const std::string wname = prefix + ".weight";
  TensorView w = ck.get(wname);
  switch (w.dtype()) {
    case DType::kF8E4M3: {
      ck.expect(wname, DType::kF8E4M3, {out, in});
      l.block_rows_ = q.weight_block_rows;
      l.block_cols_ = q.weight_block_cols;
      const int64_t sr = (out + l.block_rows_ - 1) / l.block_rows_;
      const int64_t sc = (in + l.block_cols_ - 1) / l.block_cols_;
      l.scale_ = ck.expect(prefix + ".scale", DType::kF8E8M0, {sr, sc}).data;
      l.format_ = WeightFormat::kFp8Block;
      break;
    }
    case DType::kI8: {  // packed FP4 experts: [out, in/2] + E8M0 [out, in/32]
      DSV41_CHECK(in % 32 == 0, kCorruptFile, "{}: FP4 tensor '{}' needs in = {} divisible by 32",
                  *w.file, wname, in);
      ck.expect(wname, DType::kI8, {out, in / 2});
      l.block_cols_ = 32;
      l.scale_ = ck.expect(prefix + ".scale", DType::kF8E8M0, {out, in / 32}).data;
      l.format_ = WeightFormat::kFp4Row;
      break;
    }
    case DType::kBF16:
    case DType::kF32:
      ck.expect_any(wname, {DType::kBF16, DType::kF32}, {out, in});
      l.format_ = w.dtype() == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
      break;
    default:
      DSV41_FAIL(kCorruptFile, "{}: tensor '{}' has dtype {}, expected F8_E4M3, I8 (FP4), BF16 or F32",
                 *w.file, wname, dtype_name(w.dtype()));
  }
  l.w_ = w.data;
  return l;
}

Linear Linear::bind_plain(const Checkpoint& ck, const std::string& name, int64_t out, int64_t in) {
  TensorView w = ck.expect_any(name, {DType::kBF16, DType::kF32}, {out, in});
  Linear l;
  l.out_ = out;
  l.in_ = in;
  l.format_ = w.dtype() == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
  l.w_ = w.data;
  return l;
}

void Linear::dequantize_row(int64_t r, float* dst) const {
  switch (format_) {
    case WeightFormat::kF32:
      std::memcpy(dst, w_ + r * in_ * 4, in_ * 4);
      break;
    case WeightFormat::kBF16:
      for (int64_t c = 0; c < in_; ++c) {
        uint16_t b;
        std::memcpy(&b, w_ + (r * in_ + c) * 2, 2);
        dst[c] = bf16_to_f32(b);
      }
      break;
    case WeightFormat::kFp8Block: {
      const int64_t sc = (in_ + block_cols_ - 1) / block_cols_;
      const uint8_t* srow = scale_ + (r / block_rows_) * sc;
      const uint8_t* wrow = w_ + r * in_;
      for (int64_t c = 0; c < in_; ++c)
        dst[c] = e4m3_to_f32(wrow[c]) * e8m0_to_f32(srow[c / block_cols_]);
      break;
    }
    case WeightFormat::kFp4Row: {
      const uint8_t* wrow = w_ + r * (in_ / 2);
      const uint8_t* srow = scale_ + r * (in_ / block_cols_);
      for (int64_t c = 0; c < in_; ++c) {
        const uint8_t byte = wrow[c / 2];
        const uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xF);  // even column = low nibble
        dst[c] = e2m1_to_f32(code) * e8m0_to_f32(srow[c / block_cols_]);
      }
      break;
    }
  }
}

void Linear::forward(const float* x, int64_t T, float* y, ThreadPool* pool) const {
  forward_rows(x, T, 0, out_, y, pool);
}

void Linear::forward_rows(const float* x, int64_t T, int64_t row_begin, int64_t row_end, float* y,
                          ThreadPool* pool) const {
  DSV41_CHECK(w_ != nullptr, kInternal, "Linear used before bind");
  DSV41_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= out_, kInternal,
              "Linear rows [{}, {}) outside [0, {})", row_begin, row_end, out_);
  const int64_t n = row_end - row_begin;
  auto work = [&](size_t b, size_t e) {
    std::vector<float> row(in_);
    for (size_t i = b; i < e; ++i) {
      const int64_t o = row_begin + static_cast<int64_t>(i);
      dequantize_row(o, row.data());
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * in_;
        float acc = 0.0f;
        for (int64_t c = 0; c < in_; ++c) acc += xt[c] * row[c];
        y[t * n + static_cast<int64_t>(i)] = acc;
      }
    }
  };
  if (pool != nullptr && n * T * in_ > (1 << 15)) {
    pool->parallel_for(static_cast<size_t>(n), work);
  } else {
    work(0, static_cast<size_t>(n));
  }
}

std::vector<float> load_vector(const Checkpoint& ck, const std::string& name, int64_t n) {
  return tensor_to_f32(ck.expect_any(name, {DType::kBF16, DType::kF32}, {n}));
}

std::vector<float> load_matrix(const Checkpoint& ck, const std::string& name, int64_t rows,
                               int64_t cols) {
  return tensor_to_f32(ck.expect_any(name, {DType::kBF16, DType::kF32}, {rows, cols}));
}

}  // namespace dsv41
