// decode_webp in a build without libwebp (CMake did not find libwebp-dev).
#include <cstdio>

#include "vision/image_codecs.hpp"

namespace dsv41::vision::codecs {

void decode_webp(const unsigned char*, size_t, long long, DecodedPixels* out) {
  std::snprintf(out->error, sizeof(out->error),
                "this build has no WebP decoder (libwebp-dev was not found when it was "
                "configured; scripts/setup.sh installs it); send PNG or JPEG");
  out->unsupported = true;
}

}  // namespace dsv41::vision::codecs
