// dsv41::decode_image (public, dsv41/image.hpp) over the vision concern's decoder.
#include "dsv41/image.hpp"
#include "vision/image_decoder.hpp"

namespace dsv41 {

Result<DecodedImage> decode_image(std::span<const uint8_t> bytes, int64_t max_pixels) {
  if (max_pixels < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "decode_image: max_pixels = " + std::to_string(max_pixels) + " must be >= 1");
  Result<vision::RgbImage> r = vision::decode_image(bytes, max_pixels);
  if (!r.is_ok()) return r.status();
  return DecodedImage{r->width, r->height, std::move(r->rgb)};
}

}  // namespace dsv41
