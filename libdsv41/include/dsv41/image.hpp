// Image input (spec model-architecture.md §7): pixels in, the image span's input embeddings out.
// Model::encode_image runs the vision tower (CPU reference); Session::append_image puts the span
// into a sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dsv41/export.hpp"
#include "dsv41/status.hpp"

namespace dsv41 {

// A decoded image: 8-bit RGB, [height, width, 3] row-major. Borrowed for the call only.
struct ImagePixels {
  int width = 0;
  int height = 0;
  std::span<const uint8_t> rgb;
};

// Decoded pixels that own their buffer.
struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]
  ImagePixels pixels() const { return {width, height, rgb}; }
};

// PNG, JPEG, GIF or WebP bytes to RGB, as the reference's `PIL.Image.open(f).convert("RGB")`
// (palettes expanded, grey replicated, alpha dropped, GIF and WebP as their first frame;
// docs/vision.md). Errors: kInvalidArgument naming the problem (unknown format, corrupt data,
// more than max_pixels pixels: checked from the header before decoding), kUnsupported (CMYK JPEG,
// or a format whose library the build lacks: libpng, libjpeg, giflib, libwebp).
DSV41_API Result<DecodedImage> decode_image(std::span<const uint8_t> bytes,
                                            int64_t max_pixels = int64_t{1} << 25);

// Prepares a token prompt for images: every image_token_id in `prompt` (one per image, in order:
// a rendered chat prompt's <｜deepseek_image｜> placeholders) is repeated positions[i] times in
// place, the span of image i. Returns the offsets of the spans in the new prompt (for
// PromptImage::offset). kInvalidArgument naming both counts when the prompt holds another number
// of placeholders than `positions` has entries, or naming the image whose positions are < 1 or
// would grow the prompt past 2^26 tokens; the prompt is unchanged then.
DSV41_API Result<std::vector<int64_t>> expand_image_placeholders(
    std::vector<int32_t>& prompt, int32_t image_token_id, std::span<const int64_t> positions);

// One encoded image: the input embeddings of its span ([image_start], rows of aligner outputs
// each closed by [image_newline], [image_end]). Move-only; independent of the Model after
// creation.
class DSV41_API ImageEmbedding {
 public:
  ImageEmbedding(ImageEmbedding&&) noexcept;
  ImageEmbedding& operator=(ImageEmbedding&&) noexcept;
  ImageEmbedding(const ImageEmbedding&) = delete;
  ImageEmbedding& operator=(const ImageEmbedding&) = delete;
  ~ImageEmbedding();

  // Sequence positions the image takes: rows · (cols + 1) + 2 (at most max_image_tokens).
  int64_t positions() const;
  int rows() const;  // aligner grid
  int cols() const;
  int64_t embedding_dim() const;  // the text model's hidden size
  // [positions(), embedding_dim()] fp32.
  std::span<const float> values() const;

  struct Impl;
  explicit ImageEmbedding(std::unique_ptr<Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv41
