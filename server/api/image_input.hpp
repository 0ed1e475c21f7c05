// Image parts of chat messages: data-URL parsing, base64 decoding and a header-only probe of the
// format and pixel size (PNG, JPEG, GIF, WebP), so that a decompression bomb is refused before
// any pixel buffer exists (api-and-clients.md §4.6). Remote URLs are never fetched.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dsv41/status.hpp"

namespace dsv41::server {

struct ImageInfo {
  std::string format;  // "png", "jpeg", "gif", "webp"
  int64_t width = 0;
  int64_t height = 0;
};

// RFC 4648 base64 (padding optional, whitespace rejected). kInvalidArgument names the offset.
Result<std::string> decode_base64(std::string_view text);

// Format and dimensions from the first bytes; kInvalidArgument when the magic is unknown or the
// header is truncated/inconsistent.
Result<ImageInfo> probe_image(std::string_view bytes);

// "data:<mime>;base64,<payload>" → probe; remote (http/https/other) URLs → kUnsupported; a pixel
// count above `max_pixels` → kInvalidArgument naming both numbers.
Result<ImageInfo> check_image_url(std::string_view url, int64_t max_pixels);
// The same checks, returning the image file's bytes (and its header facts in *info).
Result<std::string> image_url_bytes(std::string_view url, int64_t max_pixels, ImageInfo* info);

}  // namespace dsv41::server
