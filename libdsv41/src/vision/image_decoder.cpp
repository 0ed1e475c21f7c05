// decode_image: picks the format's decoder (image_codecs.hpp) by its magic bytes and turns the
// malloc'd result into an RgbImage.
#include "vision/image_decoder.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "core/check.hpp"
#include "vision/image_codecs.hpp"

namespace dsv41::vision {

namespace {

bool starts_with(std::span<const uint8_t> b, const char* magic, size_t n) {
  return b.size() >= n && std::memcmp(b.data(), magic, n) == 0;
}

}  // namespace

bool image_decoding_available() { return true; }

Result<RgbImage> decode_image(std::span<const uint8_t> bytes, int64_t max_pixels) {
  using Decoder = void (*)(const unsigned char*, size_t, long long, codecs::DecodedPixels*);
  Decoder decoder = nullptr;
  const char* format = nullptr;
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n", 8)) {
    decoder = codecs::decode_png, format = "PNG";
  } else if (starts_with(bytes, "\xff\xd8\xff", 3)) {
    decoder = codecs::decode_jpeg, format = "JPEG";
  } else if (starts_with(bytes, "GIF87a", 6) || starts_with(bytes, "GIF89a", 6)) {
    decoder = codecs::decode_gif, format = "GIF";
  } else if (starts_with(bytes, "RIFF", 4) && bytes.size() >= 12 &&
             std::memcmp(bytes.data() + 8, "WEBP", 4) == 0) {
    decoder = codecs::decode_webp, format = "WebP";
  } else {
    return Status(ErrorCode::kInvalidArgument,
                  "image: unknown format (expected PNG, JPEG, GIF or WebP)");
  }
  codecs::DecodedPixels d;
  decoder(bytes.data(), bytes.size(), max_pixels, &d);
  // The codec's malloc'd pixels are freed on every path, the copy's bad_alloc included.
  const std::unique_ptr<unsigned char, decltype(&std::free)> pixels(d.rgb, &std::free);
  if (!d.rgb)
    return Status(d.unsupported ? ErrorCode::kUnsupported : ErrorCode::kInvalidArgument,
                  fmt::format("image: {}: {}", format, d.error[0] ? d.error : "decoding failed"));
  std::optional<RgbImage> out;
  Status st = detail::capture_status([&] {
    out.emplace(RgbImage{d.width, d.height,
                         std::vector<uint8_t>(d.rgb, d.rgb + size_t{3} * d.width * d.height)});
  });
  if (!st.is_ok()) return st;
  return std::move(*out);
}

}  // namespace dsv41::vision
