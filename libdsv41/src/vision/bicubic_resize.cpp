#include "vision/bicubic_resize.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsv41::vision {

namespace {

// Pillow: 32 bits minus 8 for the value, minus 2 for the kernel's negative lobes and overshoot.
constexpr int kPrecisionBits = 22;

// The cubic convolution kernel with a = -0.5, support 2; the expressions keep Pillow's order.
double cubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// For each output index: the first input index and the fixed-point weights of its taps.
struct Taps {
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // [out, ksize]
  int ksize = 0;
};

Taps taps(int in_size, int out_size) {
  const double scale = static_cast<double>(static_cast<float>(in_size)) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 2.0 * filterscale;
  Taps t;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weights.assign(static_cast<size_t>(out_size) * t.ksize, 0);
  std::vector<double> k(t.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // Truncation toward zero, as Pillow's (int) casts.
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = cubic((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[x] / ww : k[x];
      t.weights[static_cast<size_t>(xx) * t.ksize + x] =
          w < 0 ? static_cast<int32_t>(-0.5 + w * (1 << kPrecisionBits))
                : static_cast<int32_t>(0.5 + w * (1 << kPrecisionBits));
    }
    t.first[xx] = xmin;
    t.count[xx] = xmax;
  }
  return t;
}

uint8_t clip8(int64_t acc) {
  return static_cast<uint8_t>(std::clamp<int64_t>(acc >> kPrecisionBits, 0, 255));
}

// One pass along x (horizontal) of an [h, w, 3] image to width out_w.
RgbImage pass_x(const RgbImage& src, int out_w) {
  const Taps t = taps(src.width, out_w);
  RgbImage out{out_w, src.height, std::vector<uint8_t>(size_t{3} * out_w * src.height)};
  for (int y = 0; y < src.height; ++y)
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &t.weights[static_cast<size_t>(xx) * t.ksize];
      for (int c = 0; c < 3; ++c) {
        int64_t acc = int64_t{1} << (kPrecisionBits - 1);
        for (int x = 0; x < t.count[xx]; ++x)
          acc += src.pixel(t.first[xx] + x, y)[c] * int64_t{k[x]};
        out.pixel(xx, y)[c] = clip8(acc);
      }
    }
  return out;
}

// One pass along y (vertical) to height out_h.
RgbImage pass_y(const RgbImage& src, int out_h) {
  const Taps t = taps(src.height, out_h);
  RgbImage out{src.width, out_h, std::vector<uint8_t>(size_t{3} * src.width * out_h)};
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &t.weights[static_cast<size_t>(yy) * t.ksize];
    for (int x = 0; x < src.width; ++x)
      for (int c = 0; c < 3; ++c) {
        int64_t acc = int64_t{1} << (kPrecisionBits - 1);
        for (int y = 0; y < t.count[yy]; ++y)
          acc += src.pixel(x, t.first[yy] + y)[c] * int64_t{k[y]};
        out.pixel(x, yy)[c] = clip8(acc);
      }
  }
  return out;
}

// Python's round() of a double: half to even.
int round_half_even(double x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace

RgbImage resize_bicubic(const RgbImage& src, int out_w, int out_h) {
  if (out_w == src.width && out_h == src.height) return src;
  // Pillow resamples rows first, then columns; a pass whose size is unchanged is skipped.
  RgbImage out = out_w != src.width ? pass_x(src, out_w) : src;
  if (out_h != src.height) out = pass_y(out, out_h);
  return out;
}

Result<RgbImage> letterbox(const RgbImage& src, int out_w, int out_h, std::array<uint8_t, 3> fill) {
  // ImageOps.contain: shrink one side so the aspect ratio is kept.
  int fit_w = out_w, fit_h = out_h;
  const double im_ratio = static_cast<double>(src.width) / src.height;
  const double dest_ratio = static_cast<double>(out_w) / out_h;
  if (im_ratio > dest_ratio) {
    fit_h = round_half_even(static_cast<double>(src.height) / src.width * out_w);
  } else if (im_ratio < dest_ratio) {
    fit_w = round_half_even(static_cast<double>(src.width) / src.height * out_h);
  }
  if (fit_w < 1 || fit_h < 1)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("image: {}x{} is too elongated to fit {}x{} pixels (a side would be "
                              "0 pixels)",
                              src.width, src.height, out_w, out_h));
  RgbImage resized = resize_bicubic(src, fit_w, fit_h);
  if (fit_w == out_w && fit_h == out_h) return resized;
  RgbImage out{out_w, out_h, std::vector<uint8_t>(size_t{3} * out_w * out_h)};
  for (int64_t i = 0; i < int64_t{out_w} * out_h; ++i)
    std::copy(fill.begin(), fill.end(), out.rgb.begin() + i * 3);
  const int x0 = fit_w != out_w ? round_half_even((out_w - fit_w) * 0.5) : 0;
  const int y0 = fit_w != out_w ? 0 : round_half_even((out_h - fit_h) * 0.5);
  for (int y = 0; y < fit_h; ++y)
    std::copy_n(resized.pixel(0, y), size_t{3} * fit_w, out.pixel(x0, y0 + y));
  return out;
}

}  // namespace dsv41::vision
