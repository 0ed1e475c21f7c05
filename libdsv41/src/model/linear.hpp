// Linear: y[T, out] = x[T, in] · Wᵀ for a weight W [out, in] (nn.Linear convention) read straight
// from the mmapped checkpoint in its stored format, dequantised one row at a time (no fp32 copy of
// the model). Formats (spec model-architecture.md §1.4): FP8 e4m3 + E8M0 32x32 block scales,
// packed FP4 e2m1 (even column = low nibble) + E8M0 per-row-per-32 scales, BF16, F32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "loader/checkpoint.hpp"

namespace dsv41 {

class ThreadPool;

enum class WeightFormat { kF32, kBF16, kFp8Block, kFp4Row };

class Linear {
 public:
  Linear() = default;
  // Binds `<prefix>.weight` (and `<prefix>.scale` for FP8/FP4) and checks dtype and shape
  // [out, in] (FP4: [out, in/2] I8 + [out, in/block] E8M0); errors name the tensor and file.
  static Linear bind(const Checkpoint& ck, const std::string& prefix, int64_t out, int64_t in,
                     const QuantizationConfig& q);
  // A BF16/F32 tensor without `.weight` suffix handling: binds `name` itself as [out, in].
  static Linear bind_plain(const Checkpoint& ck, const std::string& name, int64_t out, int64_t in);

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  WeightFormat format() const { return format_; }
  bool bound() const { return w_ != nullptr; }

  // dst[in] = W[r, :] in fp32 (exact dequantisation).
  void dequantize_row(int64_t r, float* dst) const;
  // y[t, o] = Σ_i x[t, i] · W[o, i], fp32 accumulation in index order. Rows of W are split across
  // the pool (if given); each row is dequantised once per call.
  void forward(const float* x, int64_t T, float* y, ThreadPool* pool) const;
  // Rows [row_begin, row_end) only: y[t, o - row_begin] (grouped wo_a).
  void forward_rows(const float* x, int64_t T, int64_t row_begin, int64_t row_end, float* y,
                    ThreadPool* pool) const;

  // A view of rows [r0, r1) and columns [c0, c1) of this weight (a tensor-parallel shard,
  // docs/tp.md): out_features() = r1 - r0, in_features() = c1 - c0, row i of the view is row
  // r0 + i of the tensor read from column c0 on, with the tensor's own block scales (no
  // alignment needed). Zero-copy: the view reads only its shard's bytes of the mmapped file.
  // kInvalidArgument (naming `what`) when the range is empty or outside [0, out) x [0, in).
  Linear slice(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const std::string& what) const;

  // The stored bytes of this view, for backends that copy the weight as it is on disk
  // (backend/cuda/forward/device_linear): true when the view's rows are whole stored rows and,
  // for FP8, start on a scale-block row, so the weight and the scales of the view are each one
  // contiguous run of the mmapped file. False for a column slice (tensor-parallel wo_b).
  bool contiguous() const;
  const uint8_t* weight_bytes() const;  // stored row 0 of the view
  int64_t weight_row_bytes() const;     // in·4 (F32), in·2 (BF16), in (FP8), in/2 (FP4)
  const uint8_t* scale_bytes() const;   // its first scale row; nullptr for BF16/F32
  int64_t scale_rows() const;           // ceil(out/32) (FP8), out (FP4), 0 (BF16/F32)
  int64_t scale_row_bytes() const;      // ceil(in/32) (FP8), in/32 (FP4), 0 (BF16/F32)
  int64_t block_rows() const { return block_rows_; }
  int64_t block_cols() const { return block_cols_; }
  // Where the view starts in the stored tensor (0, 0 unless this is a slice); with
  // weight_bytes() / weight_row_bytes() (and scale_bytes() / scale_row_bytes()) the strided
  // address of any view element, for backends that copy a slice's rows.
  int64_t row_offset() const { return row0_; }
  int64_t col_offset() const { return col0_; }

 private:
  WeightFormat format_ = WeightFormat::kF32;
  const uint8_t* w_ = nullptr;
  const uint8_t* scale_ = nullptr;
  int64_t out_ = 0, in_ = 0;
  int64_t block_rows_ = 32, block_cols_ = 32;
  // Slice offsets into the full stored tensor [full_out, full_in]: view row r is stored row
  // row0_ + r, view column c is stored column col0_ + c; full_in_ is the stored row length.
  int64_t row0_ = 0, col0_ = 0, full_in_ = 0;
};

// A 1-D fp32 vector (norm weights, biases, sinks) converted from BF16/F32 at bind time.
std::vector<float> load_vector(const Checkpoint& ck, const std::string& name, int64_t n);
// A 2-D fp32 matrix [rows, cols] converted from BF16/F32 (small tensors only: hc_fn, gate).
std::vector<float> load_matrix(const Checkpoint& ck, const std::string& name, int64_t rows,
                               int64_t cols);

}  // namespace dsv41
