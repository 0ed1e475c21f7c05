#include "vision/image_layout.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace dsv41::vision {

namespace {

// ceil((h // p) / r) and the same for w: the aligner grid of a pixel size.
std::pair<int64_t, int64_t> llm_grid(int64_t h, int64_t w, int p, int r) {
  return {static_cast<int64_t>(std::ceil(static_cast<double>(h / p) / r)),
          static_cast<int64_t>(std::ceil(static_cast<double>(w / p) / r))};
}

int64_t tokens(std::pair<int64_t, int64_t> g) { return g.first * (g.second + 1) + 2; }

// §7.2 step 4: the largest aspect-preserving size whose span fits max_n tokens, as (h, w).
std::pair<int64_t, int64_t> shrink_to_budget(double height, double width, int p, int r, int max_n) {
  const double ratio = height / width;
  const double max_w = std::sqrt((max_n - 2) / ratio + 0.25) - 0.5;
  const double max_h = max_w * ratio;
  const int64_t cell = int64_t{p} * r;
  if (max_w < 1.0) return {(max_n - 2) / 2 * cell, cell};  // very tall: one column
  if (max_h < 1.0) return {cell, (max_n - 3) * cell};      // very wide: one row
  const double beta =
      std::min(static_cast<double>(static_cast<int64_t>(std::floor(max_w)) * cell) / width,
               static_cast<double>(static_cast<int64_t>(std::floor(max_h)) * cell) / height);
  return {static_cast<int64_t>(std::floor(height * beta / p)) * p,
          static_cast<int64_t>(std::floor(width * beta / p)) * p};
}

}  // namespace

Result<ImageLayout> image_layout(int64_t src_w, int64_t src_h, const VisionConfig& v) {
  if (src_w < 1 || src_h < 1 || src_w > kMaxImageSide || src_h > kMaxImageSide)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("image: {}x{} pixels; each side must be in [1, {}]", src_w, src_h,
                              kMaxImageSide));
  const int p = v.patch_size, r = v.downsample_ratio, max_n = v.max_image_tokens;
  // Step 1 (the reference keeps ints until a ratio makes them floats; double holds both exactly).
  double width = static_cast<double>(src_w), height = static_cast<double>(src_h);
  const bool capped = v.max_wh_ratio > 0;
  if (capped && width > height * v.max_wh_ratio) width = height * v.max_wh_ratio;
  // Step 2: scale both sides up to min_pixels, truncating (pow(x, 0.5) as the reference's ** 0.5).
  const double area = width * height;
  if (area > 0 && area < static_cast<double>(v.min_pixels)) {
    const double s = std::pow(static_cast<double>(v.min_pixels) / area, 0.5);
    width = std::trunc(width * s);
    height = std::trunc(height * s);
  }
  // Step 3: round each side up to a multiple of the patch.
  int64_t best_w = static_cast<int64_t>(std::ceil(width / p)) * p;
  int64_t best_h = static_cast<int64_t>(std::ceil(height / p)) * p;
  // Step 4: over budget -> shrink.
  std::pair<int64_t, int64_t> grid = llm_grid(best_h, best_w, p, r);
  if (tokens(grid) > max_n) {
    std::tie(best_h, best_w) = shrink_to_budget(height, width, p, r, max_n);
    grid = llm_grid(best_h, best_w, p, r);
  }
  if (tokens(grid) > max_n || best_w < p || best_h < p)
    return Status(ErrorCode::kInternal,
                  fmt::format("image: sizing {}x{} gave {}x{} pixels and {} span tokens (limit {})",
                              src_w, src_h, best_w, best_h, tokens(grid), max_n));
  ImageLayout l;
  l.width = static_cast<int>(best_w);
  l.height = static_cast<int>(best_h);
  l.vit_h = static_cast<int>(best_h / p);
  l.vit_w = static_cast<int>(best_w / p);
  l.llm_h = static_cast<int>(grid.first);
  l.llm_w = static_cast<int>(grid.second);
  l.stretch = capped && static_cast<double>(src_w) >= v.max_wh_ratio * static_cast<double>(src_h);
  return l;
}

}  // namespace dsv41::vision
