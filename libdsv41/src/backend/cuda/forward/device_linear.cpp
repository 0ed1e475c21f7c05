#include "backend/cuda/forward/device_linear.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/cuda_check.hpp"
#include "core/check.hpp"
#include "dsv41k/launchers.hpp"
#include "quant/dtype.hpp"

namespace dsv41::cuda {

namespace {

// Bits per stored element of a format.
int64_t element_bits(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return 32;
    case WeightFormat::kBF16:
      return 16;
    case WeightFormat::kFp8Block:
      return 8;
    case WeightFormat::kFp4Row:
      return 4;
  }
  return 0;
}

// A slice whose first row and column sit on the stored scale grid keeps its stored values and
// scales exactly (the tensor-parallel shards at the released dims: head/group/expert-width
// boundaries are multiples of 32). FP4 scales are per row, so only the column must align.
bool on_scale_grid(const Linear& l) {
  switch (l.format()) {
    case WeightFormat::kFp8Block:
      return l.row_offset() % l.block_rows() == 0 && l.col_offset() % l.block_cols() == 0;
    case WeightFormat::kFp4Row:
      return l.col_offset() % l.block_cols() == 0;
    default:
      return true;
  }
}

// Views off the scale grid (tiny test models split inside a 32-wide block) go up as their exact
// fp32 dequantisation; a larger one would quadruple its bytes, so it is refused.
constexpr int64_t kMaxDequantisedSliceBytes = int64_t{256} << 20;

}  // namespace

DeviceLinear DeviceLinear::upload(const Linear& l, const std::string& what) {
  DSV41_CHECK(l.bound(), kInvalidArgument, "{}: unbound weight", what);
  const int64_t in = l.in_features();
  if (!on_scale_grid(l)) {  // from_f32 checks the dense GEMV's width rule
    const int64_t out = l.out_features();
    DSV41_CHECK(out * in * 4 <= kMaxDequantisedSliceBytes, kUnsupported,
                "{}: a tensor-parallel slice at row {} / column {} is off the 32-wide scale grid "
                "and too large ({} x {}) to upload dequantised",
                what, l.row_offset(), l.col_offset(), out, in);
    std::vector<float> w(static_cast<size_t>(out * in));
    for (int64_t r = 0; r < out; ++r) l.dequantize_row(r, w.data() + r * in);
    return from_f32(w, out, in, what);
  }
  const int64_t align = l.format() == WeightFormat::kFp8Block ? 16
                        : l.format() == WeightFormat::kFp4Row ? 32
                                                              : 8;
  DSV41_CHECK(in % align == 0, kInvalidArgument,
              "{}: input width {} is not a multiple of {} (the CUDA GEMV of this format)", what, in,
              align);
  DeviceLinear d;
  d.format_ = l.format();
  d.out_ = l.out_features();
  d.in_ = in;
  d.block_rows_ = l.block_rows();
  d.name_ = what;
  // Rows of the view are strided runs of the mapped file (the whole stored row when the view is
  // not a column slice): one 2-D copy from the mapping, no host staging.
  const int64_t bits = element_bits(l.format());
  const size_t width = static_cast<size_t>(in * bits / 8);
  d.w_ = DeviceBuffer(width * static_cast<size_t>(d.out_));
  d.w_.upload_2d(l.weight_bytes() + l.col_offset() * bits / 8,
                 static_cast<size_t>(l.weight_row_bytes()), width, static_cast<size_t>(d.out_));
  if (l.scale_bytes() != nullptr) {
    const int64_t bc = l.block_cols();
    d.scale_row_bytes_ = l.format() == WeightFormat::kFp8Block ? (in + bc - 1) / bc : in / bc;
    const size_t sw = static_cast<size_t>(d.scale_row_bytes_);
    const size_t rows = static_cast<size_t>(l.scale_rows());
    d.scale_ = DeviceBuffer(sw * rows);
    d.scale_.upload_2d(l.scale_bytes() + l.col_offset() / bc,
                       static_cast<size_t>(l.scale_row_bytes()), sw, rows);
  }
  return d;
}

bool DeviceLinear::stackable(const Linear& a, const Linear& b) {
  return a.bound() && b.bound() && a.contiguous() && b.contiguous() && a.format() == b.format() &&
         a.in_features() == b.in_features() && a.weight_row_bytes() == b.weight_row_bytes() &&
         a.scale_row_bytes() == b.scale_row_bytes() && a.block_rows() == b.block_rows() &&
         (a.format() != WeightFormat::kFp8Block || a.out_features() % a.block_rows() == 0);
}

DeviceLinear DeviceLinear::stack(const Linear& a, const Linear& b, const std::string& what) {
  DSV41_CHECK(stackable(a, b), kInvalidArgument,
              "{}: the two weights differ in format or width (or FP8 rows {} are not whole scale "
              "blocks)",
              what, a.out_features());
  DeviceLinear d = upload(a, what);  // checks the format's input width
  const size_t wa = static_cast<size_t>(a.out_features() * a.weight_row_bytes());
  const size_t wb = static_cast<size_t>(b.out_features() * b.weight_row_bytes());
  DeviceBuffer w(wa + wb);
  DSV41_CUDA_CHECK(cudaMemcpy(w.data(), d.w_.data(), wa, cudaMemcpyDeviceToDevice));
  DSV41_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(w.data()) + wa, b.weight_bytes(), wb,
                              cudaMemcpyHostToDevice));
  d.w_ = std::move(w);
  if (a.scale_bytes() != nullptr) {
    const size_t sa = static_cast<size_t>(a.scale_rows() * a.scale_row_bytes());
    const size_t sb = static_cast<size_t>(b.scale_rows() * b.scale_row_bytes());
    DeviceBuffer sc(sa + sb);
    DSV41_CUDA_CHECK(cudaMemcpy(sc.data(), d.scale_.data(), sa, cudaMemcpyDeviceToDevice));
    DSV41_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(sc.data()) + sa, b.scale_bytes(), sb,
                                cudaMemcpyHostToDevice));
    d.scale_ = std::move(sc);
  }
  d.out_ = a.out_features() + b.out_features();
  // The copies above run on the legacy stream; the forward's stream is non-blocking.
  DSV41_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return d;
}

DeviceLinear DeviceLinear::from_f32(const std::vector<float>& w, int64_t out, int64_t in,
                                    const std::string& what) {
  DSV41_CHECK(out > 0 && in > 0 && static_cast<int64_t>(w.size()) == out * in, kInvalidArgument,
              "{}: {} values for a [{}, {}] weight", what, w.size(), out, in);
  DSV41_CHECK(in % 8 == 0, kInvalidArgument,
              "{}: input width {} is not a multiple of 8 (the CUDA dense GEMV)", what, in);
  DeviceLinear d;
  d.out_ = out;
  d.in_ = in;
  d.name_ = what;
  // The router gate is BF16 in the release (spec model-architecture.md §1.4) and widened at bind
  // time: stored back as BF16 it reads half the bytes and takes the tensor-core GEMM in prefill,
  // with the same values. A weight that is not exactly bf16 stays fp32.
  std::vector<uint16_t> half(w.size());
  bool exact = true;
  for (size_t i = 0; i < w.size() && exact; ++i) {
    half[i] = f32_to_bf16(w[i]);
    exact = bf16_to_f32(half[i]) == w[i];
  }
  if (exact) {
    d.format_ = WeightFormat::kBF16;
    d.w_ = DeviceBuffer(half.size() * 2);
    d.w_.upload(half.data(), half.size() * 2);
  } else {
    d.format_ = WeightFormat::kF32;
    d.w_ = upload_f32(w);
  }
  return d;
}

DeviceLinear DeviceLinear::from_fp8(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in,
                                    const std::string& what) {
  DSV41_CHECK(w != nullptr && scale != nullptr && out > 0 && in > 0, kInvalidArgument,
              "{}: empty FP8 weight", what);
  DSV41_CHECK(in % 16 == 0, kInvalidArgument,
              "{}: input width {} is not a multiple of 16 (the CUDA FP8 GEMV)", what, in);
  DeviceLinear d;
  d.format_ = WeightFormat::kFp8Block;
  d.out_ = out;
  d.in_ = in;
  d.name_ = what;
  d.scale_row_bytes_ = (in + 31) / 32;
  d.w_ = DeviceBuffer(static_cast<size_t>(out * in));
  d.w_.upload(w, static_cast<size_t>(out * in));
  const size_t sbytes = static_cast<size_t>(((out + 31) / 32) * d.scale_row_bytes_);
  d.scale_ = DeviceBuffer(sbytes);
  d.scale_.upload(scale, sbytes);
  return d;
}

bool DeviceLinear::takes_gemm(int64_t rows) const {
  return rows >= gemm_min_rows_ && format_ != WeightFormat::kF32 && in_ % 32 == 0;
}

bool DeviceLinear::takes_tc(int rows, int groups) const {
  // Below 4 rows the CUDA-core GEMV is faster (H200, µs, CUDA-core / tensor-core: wq_b 1 row
  // 19.4 / 22.7, 2 rows 21.7 / 23.0, 4 rows 40.4 / 23.6, 16 rows 195 / 35; wo_b 1 row 17.7 /
  // 29.9, 4 rows 59.5 / 30.5; docs/perf.md): the tensor-core path's two launches and k-slice
  // reduction cost more than its instruction savings there.
  constexpr int kTcMinRows = 4;
  if (scratch_ == nullptr || format_ != WeightFormat::kFp8Block || in_ % 32 != 0 ||
      rows < kTcMinRows)
    return false;
  // An input wider than the scratch (not at the released dims: 32,768 columns at most, the
  // scratch holds 65,536) stays on the CUDA-core kernel.
  return kernels::fp8_gemv_tc_workspace_bytes(in_ * groups) <= scratch_bytes_;
}

bool DeviceLinear::gemv_tc(const float* x, int rows, int groups, int64_t out, const uint8_t* w,
                           const uint8_t* scale, float* y, cudaStream_t stream) const {
  if (!takes_tc(rows, groups)) return false;
  const cudaError_t e = kernels::fp8_block_gemv_tc(x, w, scale, y, rows, groups, out, in_, scratch_,
                                                   scratch_bytes_, stream);
  if (e != cudaSuccess) {
    const std::string what = fmt::format("{} tensor-core GEMV ({} rows, {} groups, [{}, {}))",
                                         name_, rows, groups, out, in_);
    check_cuda(e, what.c_str());
  }
  return true;
}

namespace {
int64_t lins_in(std::span<const DeviceLinear* const> lins) {
  for (const DeviceLinear* l : lins)
    if (l != nullptr) return l->in_features();
  return 0;
}
}  // namespace

bool DeviceLinear::gemv_shared_x(std::span<const DeviceLinear* const> lins,
                                 std::span<float* const> ys, const float* x, int64_t rows,
                                 cudaStream_t stream, const kernels::Fp8GemvRope* rope0) {
  DSV41_CHECK(lins.size() == ys.size(), kInternal, "gemv_shared_x: {} weights, {} outputs",
              lins.size(), ys.size());
  std::vector<kernels::Fp8GemvJob> jobs;
  std::vector<size_t> alone, joined;
  int64_t in = -1;
  for (size_t j = 0; j < lins.size(); ++j) {
    const DeviceLinear* l = lins[j];
    if (l == nullptr) continue;
    DSV41_CHECK(l->in_ == lins_in(lins), kInternal,
                "gemv_shared_x: {} takes {} inputs, the first weight {}", l->name_, l->in_,
                lins_in(lins));
    const bool joins = rows >= 1 && rows <= kernels::kGemvMaxRows &&
                       l->format_ == WeightFormat::kFp8Block &&
                       !l->takes_tc(static_cast<int>(rows), 1) &&
                       static_cast<int>(jobs.size()) < kernels::kFp8GemvMaxJobs;
    if (!joins) {
      alone.push_back(j);
      continue;
    }
    in = l->in_;
    jobs.push_back({l->w_.as<uint8_t>(), l->scale_.as<uint8_t>(), ys[j], l->out_});
    joined.push_back(j);
  }
  if (jobs.size() == 1 && rope0 == nullptr) {  // nothing to share: the plain launch
    alone.push_back(joined[0]);
    jobs.clear();
  }
  const bool rotated = rope0 != nullptr && !jobs.empty() && joined[0] == 0;
  if (rotated) jobs[0].rope = *rope0;
  if (!jobs.empty()) {
    const cudaError_t e = kernels::fp8_block_gemv_multi(
        x, jobs.data(), static_cast<int>(jobs.size()), static_cast<int>(rows), in, stream);
    if (e != cudaSuccess) {
      std::string names;
      for (size_t j = 0; j < lins.size(); ++j)
        if (lins[j] != nullptr) names += (names.empty() ? "" : ", ") + lins[j]->name_;
      const std::string what = fmt::format("shared-x GEMV of {} ({} rows, in {})", names, rows, in);
      check_cuda(e, what.c_str());
    }
  }
  for (size_t j : alone) lins[j]->gemv(x, rows, ys[j], stream);
  return rotated;
}

void DeviceLinear::gemv(const float* x, int64_t rows, float* y, cudaStream_t stream) const {
  gemv_rows(x, rows, 0, out_, y, stream);
}

bool DeviceLinear::gemv_grouped(const float* x, int64_t rows, int64_t groups, float* y,
                                cudaStream_t stream) const {
  if (format_ != WeightFormat::kFp8Block || rows < 1 || rows > kernels::kGemvMaxRows ||
      groups < 1 || out_ % groups != 0 || (out_ / groups) % block_rows_ != 0 || groups > 0x7FFFFFFF)
    return false;
  const cudaError_t e = kernels::fp8_block_gemv_grouped(
      x, w_.as<uint8_t>(), scale_.as<uint8_t>(), y, static_cast<int>(rows),
      static_cast<int>(groups), out_ / groups, in_, stream);
  DSV41_CHECK(e == cudaSuccess, kInternal, "{}: grouped GEMV of {} rows x {} groups: {}", name_,
              rows, groups, cudaGetErrorString(e));
  return true;
}

void DeviceLinear::gemv_rows(const float* x, int64_t rows, int64_t r0, int64_t r1, float* y,
                             cudaStream_t stream) const {
  DSV41_CHECK(0 <= r0 && r0 < r1 && r1 <= out_, kInternal, "{}: rows [{}, {}) outside [0, {})",
              name_, r0, r1, out_);
  const int64_t n = r1 - r0;
  const uint8_t* w = w_.as<uint8_t>();
  const uint8_t* sc = scale_.as<uint8_t>();
  switch (format_) {
    case WeightFormat::kFp8Block:
      DSV41_CHECK(r0 % block_rows_ == 0, kInternal,
                  "{}: row range starts at {}, not on a {}-row block", name_, r0, block_rows_);
      w += r0 * in_;
      sc += (r0 / block_rows_) * scale_row_bytes_;
      break;
    case WeightFormat::kFp4Row:
      w += r0 * (in_ / 2);
      sc += r0 * scale_row_bytes_;
      break;
    case WeightFormat::kBF16:
      w += r0 * in_ * 2;
      break;
    case WeightFormat::kF32:
      w += r0 * in_ * 4;
      break;
  }
  // Prefill pieces: the tensor-core GEMM decodes each weight tile once per 64 rows instead of
  // once per 16 (docs/kernels.md "Quantised GEMM").
  if (takes_gemm(rows)) {
    void* ws = gemm_ws_;
    const size_t wb = gemm_ws_bytes_;
    const cudaError_t e =
        format_ == WeightFormat::kFp8Block
            ? kernels::fp8_block_gemm(x, w, sc, y, rows, n, in_, prefill_x_, ws, wb, stream)
        : format_ == WeightFormat::kFp4Row
            ? kernels::fp4_expert_gemm(x, w, sc, y, rows, n, in_, prefill_x_, ws, wb, stream)
            : kernels::bf16_gemm(x, w, y, rows, n, in_, prefill_x_, ws, wb, stream);
    if (e != cudaSuccess) {
      const std::string what = fmt::format("{} GEMM ({} rows, [{}, {}))", name_, rows, n, in_);
      check_cuda(e, what.c_str());
    }
    return;
  }
  for (int64_t t0 = 0; t0 < rows; t0 += kernels::kGemvMaxRows) {
    const int r = static_cast<int>(std::min<int64_t>(kernels::kGemvMaxRows, rows - t0));
    const float* xc = x + t0 * in_;
    float* yc = y + t0 * n;
    cudaError_t e = cudaSuccess;
    switch (format_) {
      case WeightFormat::kFp8Block:
        if (gemv_tc(xc, r, 1, n, w, sc, yc, stream)) continue;
        e = kernels::fp8_block_gemv(xc, w, sc, yc, r, n, in_, stream);
        break;
      case WeightFormat::kFp4Row:
        e = kernels::fp4_expert_gemv(xc, w, sc, yc, r, n, in_, stream);
        break;
      case WeightFormat::kBF16:
        e = kernels::dense_gemv(xc, w, kernels::DenseWeight::kBF16, yc, r, n, in_, stream);
        break;
      case WeightFormat::kF32:
        e = kernels::dense_gemv(xc, w, kernels::DenseWeight::kF32, yc, r, n, in_, stream);
        break;
    }
    if (e != cudaSuccess) {
      const std::string what = fmt::format("{} GEMV ({} rows, [{}, {}))", name_, r, n, in_);
      check_cuda(e, what.c_str());
    }
  }
}

DeviceBuffer upload_f32(const std::vector<float>& v) {
  DeviceBuffer b(v.size() * sizeof(float));
  b.upload(v.data(), v.size() * sizeof(float));
  return b;
}

}  // namespace dsv41::cuda
