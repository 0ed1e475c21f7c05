#include "vision/image_patches.hpp"

#include <fmt/format.h>

#include "quant/dtype.hpp"
#include "vision/bicubic_resize.hpp"

namespace dsv41::vision {

Result<ImagePatches> make_patches(const RgbImage& image, const VisionConfig& v) {
  if (image.width < 1 || image.height < 1 ||
      image.rgb.size() != size_t{3} * static_cast<size_t>(image.width) * image.height)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("image: {}x{} pixels with {} bytes of RGB (expected {})", image.width,
                              image.height, image.rgb.size(),
                              3 * int64_t{image.width} * int64_t{image.height}));
  Result<ImageLayout> layout = image_layout(image.width, image.height, v);
  if (!layout.is_ok()) return layout.status();
  const ImageLayout& l = *layout;
  RgbImage sized;
  if (l.stretch) {
    sized = resize_bicubic(image, l.width, l.height);
  } else {
    Result<RgbImage> boxed = letterbox(image, l.width, l.height, {127, 127, 127});
    if (!boxed.is_ok()) return boxed.status();
    sized = std::move(*boxed);
  }
  // The 256 possible values: float32 x/255, then (x - 0.5)/0.5, rounded to bf16.
  float level[256];
  for (int i = 0; i < 256; ++i) {
    const float x = static_cast<float>(i) / 255.0f;
    level[i] = bf16_to_f32(f32_to_bf16((x - 0.5f) / 0.5f));
  }
  const int p = v.patch_size;
  const int64_t per_patch = int64_t{3} * p * p;
  ImagePatches out;
  out.layout = l;
  out.values.resize(static_cast<size_t>(l.patches() * per_patch));
  for (int py = 0; py < l.vit_h; ++py)
    for (int px = 0; px < l.vit_w; ++px) {
      float* dst = out.values.data() + (int64_t{py} * l.vit_w + px) * per_patch;
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < p; ++y)
          for (int x = 0; x < p; ++x)
            dst[(int64_t{c} * p + y) * p + x] = level[sized.pixel(px * p + x, py * p + y)[c]];
    }
  return out;
}

}  // namespace dsv41::vision
