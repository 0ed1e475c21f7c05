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
      DSV41_FAIL(kCorruptFile,
                 "{}: tensor '{}' has dtype {}, expected F8_E4M3, I8 (FP4), BF16 or F32", *w.file,
                 wname, dtype_name(w.dtype()));
  }
  l.w_ = w.data;
  l.full_in_ = in;
  return l;
}

Linear Linear::slice(int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                     const std::string& what) const {
  DSV41_CHECK(w_ != nullptr, kInternal, "{}: slice of an unbound Linear", what);
  DSV41_CHECK(0 <= r0 && r0 < r1 && r1 <= out_ && 0 <= c0 && c0 < c1 && c1 <= in_, kInvalidArgument,
              "{}: shard rows [{}, {}) x columns [{}, {}) outside [0, {}) x [0, {})", what, r0, r1,
              c0, c1, out_, in_);
  Linear v = *this;
  v.row0_ = row0_ + r0;
  v.col0_ = col0_ + c0;
  v.out_ = r1 - r0;
  v.in_ = c1 - c0;
  return v;
}

bool Linear::contiguous() const {
  if (w_ == nullptr || col0_ != 0 || in_ != full_in_) return false;
  return format_ != WeightFormat::kFp8Block || row0_ % block_rows_ == 0;
}

int64_t Linear::weight_row_bytes() const {
  switch (format_) {
    case WeightFormat::kF32:
      return full_in_ * 4;
    case WeightFormat::kBF16:
      return full_in_ * 2;
    case WeightFormat::kFp8Block:
      return full_in_;
    case WeightFormat::kFp4Row:
      return full_in_ / 2;
  }
  return 0;
}

const uint8_t* Linear::weight_bytes() const { return w_ + row0_ * weight_row_bytes(); }

int64_t Linear::scale_row_bytes() const {
  switch (format_) {
    case WeightFormat::kFp8Block:
      return (full_in_ + block_cols_ - 1) / block_cols_;
    case WeightFormat::kFp4Row:
      return full_in_ / block_cols_;
    default:
      return 0;
  }
}

int64_t Linear::scale_rows() const {
  switch (format_) {
    case WeightFormat::kFp8Block:
      return (out_ + block_rows_ - 1) / block_rows_;
    case WeightFormat::kFp4Row:
      return out_;
    default:
      return 0;
  }
}

const uint8_t* Linear::scale_bytes() const {
  switch (format_) {
    case WeightFormat::kFp8Block:
      return scale_ + (row0_ / block_rows_) * scale_row_bytes();
    case WeightFormat::kFp4Row:
      return scale_ + row0_ * scale_row_bytes();
    default:
      return nullptr;
  }
}

Linear Linear::bind_plain(const Checkpoint& ck, const std::string& name, int64_t out, int64_t in) {
  TensorView w = ck.expect_any(name, {DType::kBF16, DType::kF32}, {out, in});
  Linear l;
  l.out_ = out;
  l.in_ = in;
  l.format_ = w.dtype() == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
  l.w_ = w.data;
  l.full_in_ = in;
  return l;
}

void Linear::dequantize_row(int64_t r, float* dst) const {
  // Stored row R, stored columns [C0, C0 + in_) (the whole row unless this is a slice).
  const int64_t R = row0_ + r, C0 = col0_, FI = full_in_;
  switch (format_) {
    case WeightFormat::kF32:
      std::memcpy(dst, w_ + (R * FI + C0) * 4, in_ * 4);
      break;
    case WeightFormat::kBF16:
      for (int64_t c = 0; c < in_; ++c) {
        uint16_t b;
        std::memcpy(&b, w_ + (R * FI + C0 + c) * 2, 2);
        dst[c] = bf16_to_f32(b);
      }
      break;
    case WeightFormat::kFp8Block: {
      const int64_t sc = (FI + block_cols_ - 1) / block_cols_;
      const uint8_t* srow = scale_ + (R / block_rows_) * sc;
      const uint8_t* wrow = w_ + R * FI;
      for (int64_t c = C0; c < C0 + in_; ++c)
        dst[c - C0] = e4m3_to_f32(wrow[c]) * e8m0_to_f32(srow[c / block_cols_]);
      break;
    }
    case WeightFormat::kFp4Row: {
      const uint8_t* wrow = w_ + R * (FI / 2);
      const uint8_t* srow = scale_ + R * (FI / block_cols_);
      for (int64_t c = C0; c < C0 + in_; ++c) {
        const uint8_t byte = wrow[c / 2];
        const uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xF);  // even column = low nibble
        dst[c - C0] = e2m1_to_f32(code) * e8m0_to_f32(srow[c / block_cols_]);
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
  // kRowBlock weight rows at a time, interleaved column-major in `block` ([in, kRowBlock]): each
  // token row of x is read once per block instead of once per weight row (x of a 2048-token
  // prefill is megabytes: per-row streaming was memory bound), and the kRowBlock dot products
  // advance together, which the compiler vectorises across rows. Every dot still sums its
  // products in index order from 0.0f, so y is bit-identical to the one-row-at-a-time loop.
  constexpr int64_t kRowBlock = 8, kTokenBlock = 4;
  auto work = [&](size_t b, size_t e) {
    std::vector<float> row(in_), block(in_ * kRowBlock);
    for (size_t i0 = b; i0 < e; i0 += kRowBlock) {
      const int64_t rows = std::min<int64_t>(kRowBlock, static_cast<int64_t>(e - i0));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(row_begin + static_cast<int64_t>(i0) + r, row.data());
        for (int64_t c = 0; c < in_; ++c) block[c * kRowBlock + r] = row[c];
      }
      for (int64_t r = rows; r < kRowBlock; ++r)  // a short last block computes zeros
        for (int64_t c = 0; c < in_; ++c) block[c * kRowBlock + r] = 0.0f;
      // kTokenBlock token rows at a time reuse each loaded weight column.
      int64_t t = 0;
      for (; t + kTokenBlock <= T; t += kTokenBlock) {
        float acc[kTokenBlock][kRowBlock] = {};
        for (int64_t c = 0; c < in_; ++c) {
          const float* wc = &block[c * kRowBlock];
          for (int64_t k = 0; k < kTokenBlock; ++k) {
            const float xv = x[(t + k) * in_ + c];
            for (int64_t r = 0; r < kRowBlock; ++r) acc[k][r] += xv * wc[r];
          }
        }
        for (int64_t k = 0; k < kTokenBlock; ++k)
          for (int64_t r = 0; r < rows; ++r)
            y[(t + k) * n + static_cast<int64_t>(i0) + r] = acc[k][r];
      }
      for (; t < T; ++t) {
        const float* xt = x + t * in_;
        float acc[kRowBlock] = {};
        for (int64_t c = 0; c < in_; ++c) {
          const float* wc = &block[c * kRowBlock];
          for (int64_t r = 0; r < kRowBlock; ++r) acc[r] += xt[c] * wc[r];
        }
        for (int64_t r = 0; r < rows; ++r) y[t * n + static_cast<int64_t>(i0) + r] = acc[r];
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
