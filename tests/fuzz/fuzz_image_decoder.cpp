// libFuzzer target: decode_image (libpng / libjpeg behind their longjmp error handlers) must
// return an image of consistent size or an error for any byte string, within a pixel limit that
// keeps each run's allocation small.
#include <cstddef>
#include <cstdint>
#include <span>

#include "vision/image_decoder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = dsv41::vision::decode_image(std::span<const uint8_t>(data, size), 1 << 16);
  if (r.is_ok() && (r->width < 1 || r->height < 1 ||
                    r->rgb.size() != size_t{3} * static_cast<size_t>(r->width) * r->height))
    __builtin_trap();
  return 0;
}
