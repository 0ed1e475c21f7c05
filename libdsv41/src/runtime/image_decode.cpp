// dsv41::decode_image (public, dsv41/image.hpp) over the vision concern's decoder.
#include <algorithm>
#include <string>

#include "dsv41/image.hpp"
#include "vision/image_decoder.hpp"

namespace dsv41 {
namespace {
// Longest expanded prompt: 64x the 1M-token context of the release, so no real prompt reaches it,
// and a caller's huge positions[i] is an error rather than a length_error / bad_alloc thrown
// through the public API.
constexpr int64_t kMaxExpandedPrompt = int64_t{1} << 26;
}  // namespace

Result<DecodedImage> decode_image(std::span<const uint8_t> bytes, int64_t max_pixels) {
  if (max_pixels < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "decode_image: max_pixels = " + std::to_string(max_pixels) + " must be >= 1");
  Result<vision::RgbImage> r = vision::decode_image(bytes, max_pixels);
  if (!r.is_ok()) return r.status();
  return DecodedImage{r->width, r->height, std::move(r->rgb)};
}

Result<std::vector<int64_t>> expand_image_placeholders(std::vector<int32_t>& prompt,
                                                       int32_t image_token_id,
                                                       std::span<const int64_t> positions) {
  const auto found = static_cast<size_t>(std::count(prompt.begin(), prompt.end(), image_token_id));
  if (found != positions.size())
    return Status(ErrorCode::kInvalidArgument, "the prompt has " + std::to_string(found) +
                                                   " image placeholders (token id " +
                                                   std::to_string(image_token_id) + ") for " +
                                                   std::to_string(positions.size()) + " images");
  int64_t total = static_cast<int64_t>(prompt.size() - found);
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] < 1)
      return Status(ErrorCode::kInvalidArgument, "image " + std::to_string(i) + " takes " +
                                                     std::to_string(positions[i]) +
                                                     " positions (must be >= 1)");
    if (positions[i] > kMaxExpandedPrompt - total)
      return Status(ErrorCode::kInvalidArgument,
                    "image " + std::to_string(i) + " takes " + std::to_string(positions[i]) +
                        " positions: the expanded prompt would exceed " +
                        std::to_string(kMaxExpandedPrompt) + " tokens");
    total += positions[i];
  }
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(total));
  std::vector<int64_t> offsets;
  size_t next = 0;
  for (int32_t t : prompt) {
    if (t != image_token_id) {
      out.push_back(t);
      continue;
    }

    offsets.push_back(static_cast<int64_t>(out.size()));
    out.insert(out.end(), static_cast<size_t>(positions[next]), image_token_id);
    ++next;
  }
  prompt = std::move(out);
  return offsets;
}

}  // namespace dsv41
