// decode_gif in a build without giflib (CMake did not find libgif-dev).
#include <cstdio>

#include "vision/image_codecs.hpp"

namespace dsv41::vision::codecs {

void decode_gif(const unsigned char*, size_t, long long, DecodedPixels* out) {
  std::snprintf(out->error, sizeof(out->error),
                "this build has no GIF decoder (libgif-dev was not found when it was configured; "
                "scripts/setup.sh installs it); send PNG or JPEG");
  out->unsupported = true;
}

}  // namespace dsv41::vision::codecs
