#include "api/image_input.hpp"

#include <fmt/format.h>

namespace dsv41::server {

namespace {

Status invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

uint32_t be16(std::string_view b, size_t i) {
  return (uint32_t(uint8_t(b[i])) << 8) | uint8_t(b[i + 1]);
}
uint32_t be32(std::string_view b, size_t i) { return (be16(b, i) << 16) | be16(b, i + 2); }
uint32_t le16(std::string_view b, size_t i) {
  return uint32_t(uint8_t(b[i])) | (uint32_t(uint8_t(b[i + 1])) << 8);
}
uint32_t le24(std::string_view b, size_t i) {
  return le16(b, i) | (uint32_t(uint8_t(b[i + 2])) << 16);
}

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// JPEG: walk the marker segments to the first SOFn (C0..CF except C4 DHT, C8 JPG, CC DAC);
// its payload is precision(1) height(2) width(2).
Result<ImageInfo> probe_jpeg(std::string_view b) {
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (uint8_t(b[i]) != 0xFF) return invalid(fmt::format("JPEG: no marker at byte {}", i));
    const uint8_t m = uint8_t(b[i + 1]);
    if (m == 0xFF) {
      ++i;
      continue;
    }
    if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {
      i += 2;
      continue;
    }
    const uint32_t len = be16(b, i + 2);
    if (len < 2) return invalid(fmt::format("JPEG: segment length {} at byte {}", len, i));
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      if (i + 9 > b.size()) break;
      return ImageInfo{"jpeg", be16(b, i + 7), be16(b, i + 5)};
    }
    if (m == 0xDA || m == 0xD9) return invalid("JPEG: no frame header before the scan data");
    i += 2 + len;
  }
  return invalid("JPEG: truncated before the frame header");
}

Result<ImageInfo> probe_webp(std::string_view b) {
  if (b.size() < 30) return invalid("WebP: truncated header");
  const std::string_view chunk = b.substr(12, 4);
  if (chunk == "VP8 ") {
    // Key frame: 3-byte tag, start code 9D 01 2A, then 14-bit width and height.
    if (uint8_t(b[23]) != 0x9D || uint8_t(b[24]) != 0x01 || uint8_t(b[25]) != 0x2A)
      return invalid("WebP: VP8 start code missing");
    return ImageInfo{"webp", le16(b, 26) & 0x3FFF, le16(b, 28) & 0x3FFF};
  }
  if (chunk == "VP8L") {
    if (uint8_t(b[20]) != 0x2F) return invalid("WebP: VP8L signature missing");
    const uint32_t bits = le16(b, 21) | (le16(b, 23) << 16);
    return ImageInfo{"webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1};
  }
  if (chunk == "VP8X") return ImageInfo{"webp", le24(b, 24) + 1, le24(b, 27) + 1};
  return invalid(fmt::format("WebP: unknown chunk '{}'", chunk));
}

}  // namespace

Result<std::string> decode_base64(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return invalid("base64: length is not a valid encoding length");
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const int v = b64_value(text[i]);
    if (v < 0) return invalid(fmt::format("base64: invalid character at offset {}", i));
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return out;
}

Result<ImageInfo> probe_image(std::string_view b) {
  if (b.size() >= 24 && b.substr(0, 8) == "\x89PNG\r\n\x1a\n") {
    if (b.substr(12, 4) != "IHDR") return invalid("PNG: first chunk is not IHDR");
    return ImageInfo{"png", be32(b, 16), be32(b, 20)};
  }
  if (b.size() >= 3 && uint8_t(b[0]) == 0xFF && uint8_t(b[1]) == 0xD8 && uint8_t(b[2]) == 0xFF)
    return probe_jpeg(b);
  if (b.size() >= 10 && (b.substr(0, 6) == "GIF87a" || b.substr(0, 6) == "GIF89a"))
    return ImageInfo{"gif", le16(b, 6), le16(b, 8)};
  if (b.size() >= 16 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return probe_webp(b);
  return invalid("image: unknown format (expected PNG, JPEG, GIF or WebP)");
}

Result<ImageInfo> check_image_url(std::string_view url, int64_t max_pixels) {
  ImageInfo info;
  Result<std::string> bytes = image_url_bytes(url, max_pixels, &info);
  if (!bytes) return bytes.status();
  return info;
}

Result<std::string> image_url_bytes(std::string_view url, int64_t max_pixels, ImageInfo* out) {
  if (url.rfind("data:", 0) != 0)
    return Status(ErrorCode::kUnsupported,
                  "remote image URLs are not fetched; send the image as a data: URL");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return invalid("image data URL has no ',' before the data");
  const std::string_view meta = url.substr(5, comma - 5);
  if (meta.size() < 7 || meta.substr(meta.size() - 7) != ";base64")
    return invalid("image data URL must be base64 encoded (data:<mime>;base64,...)");
  Result<std::string> bytes = decode_base64(url.substr(comma + 1));
  if (!bytes) return bytes.status();
  Result<ImageInfo> info = probe_image(*bytes);
  if (!info) return info.status();
  if (info->width <= 0 || info->height <= 0)
    return invalid(fmt::format("image: {} header gives {}x{} pixels", info->format, info->width,
                               info->height));
  if (info->width * info->height > max_pixels)
    return invalid(
        fmt::format("image: {}x{} = {} pixels exceeds the limit of {} (--max-image-pixels)",
                    info->width, info->height, info->width * info->height, max_pixels));
  *out = *info;
  return bytes;
}

}  // namespace dsv41::server
