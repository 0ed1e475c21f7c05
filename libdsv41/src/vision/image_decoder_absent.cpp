// decode_image in a build without libpng / libjpeg (CMake did not find them): no format at all.
#include "vision/image_decoder.hpp"

namespace dsv41::vision {

bool image_decoding_available() { return false; }

Result<RgbImage> decode_image(std::span<const uint8_t>, int64_t) {
  return Status(ErrorCode::kUnsupported,
                "image decoding: this build has no PNG/JPEG decoder (libpng-dev and libjpeg-dev "
                "were not found when it was configured; scripts/setup.sh installs them)");
}

}  // namespace dsv41::vision
