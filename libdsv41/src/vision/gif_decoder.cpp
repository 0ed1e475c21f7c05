// GIF through giflib: the first frame as Pillow gives it (GifImagePlugin, frame 0) converted to
// RGB. Pillow's rules, reproduced:
//   - the canvas is the logical screen, grown to hold the frame if the frame reaches past it;
//   - before the frame is drawn the canvas holds the frame's transparent index when its graphic
//     control extension sets one, else index 0; the frame's own pixels are written as they are
//     (the transparent index included: convert("RGB") ignores transparency);
//   - the colour table is the frame's local one, else the global one; a table that is the
//     identity grey ramp (entry i = (i, i, i)), or none, makes the image greyscale: index i is
//     grey i; otherwise index i is table entry i, and an index past the table is black (Pillow's
//     palette is zero-filled past its size);
//   - later frames are never read (an animation is its first frame).
// Only plain data crosses giflib calls; errors are giflib's codes, named by GifErrorString.
#include <gif_lib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vision/image_codecs.hpp"

namespace dsv41::vision::codecs {

namespace {

struct GifSource {
  const unsigned char* data;
  size_t size, at;
};

int gif_read(GifFileType* gif, GifByteType* out, int n) {
  auto* src = static_cast<GifSource*>(gif->UserData);
  const size_t want = n < 0 ? 0 : static_cast<size_t>(n);
  const size_t take = src->size - src->at < want ? src->size - src->at : want;
  std::memcpy(out, src->data + src->at, take);
  src->at += take;
  return static_cast<int>(take);
}

bool is_grey_ramp(const ColorMapObject* map) {
  for (int i = 0; i < map->ColorCount; ++i) {
    const GifColorType& c = map->Colors[i];
    if (c.Red != i || c.Green != i || c.Blue != i) return false;
  }
  return true;
}

void fail(DecodedPixels* out, const char* what, int code) {
  const char* why = GifErrorString(code);
  std::snprintf(out->error, sizeof(out->error), "%s: %s", what, why ? why : "unknown error");
}

// Reads up to the first image descriptor: the frame's transparent index (-1: none).
bool read_to_first_frame(GifFileType* gif, int* transparent, DecodedPixels* out) {
  *transparent = -1;
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif, &type) == GIF_ERROR) {
      fail(out, "reading a record", gif->Error);
      return false;
    }
    if (type == IMAGE_DESC_RECORD_TYPE) {
      if (DGifGetImageDesc(gif) == GIF_ERROR) {
        fail(out, "reading the first image descriptor", gif->Error);
        return false;
      }
      return true;
    }
    if (type == TERMINATE_RECORD_TYPE) {
      std::snprintf(out->error, sizeof(out->error), "the file has no image");
      return false;
    }
    if (type != EXTENSION_RECORD_TYPE) continue;
    int code = 0;
    GifByteType* block = nullptr;
    if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) {
      fail(out, "reading an extension", gif->Error);
      return false;
    }
    // Graphic control: block[0] = 4 (length), block[1] = flags (bit 0: transparency),
    // block[4] = the transparent index. The last one before the image wins, as in Pillow.
    if (code == GRAPHICS_EXT_FUNC_CODE && block != nullptr && block[0] >= 4)
      *transparent = (block[1] & 1) ? block[4] : -1;
    while (block != nullptr) {
      if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) {
        fail(out, "reading an extension", gif->Error);
        return false;
      }
    }
  }
}

// Draws the frame's indices into the canvas of indices (rows in interlaced order when set).
bool read_frame(GifFileType* gif, unsigned char* canvas, long long cw, DecodedPixels* out) {
  const GifImageDesc& d = gif->Image;
  static const int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
  if (d.Width == 0) return true;
  const int passes = d.Interlace ? 4 : 1;
  for (int p = 0; p < passes; ++p) {
    const int start = d.Interlace ? kStart[p] : 0, step = d.Interlace ? kStep[p] : 1;
    for (int y = start; y < d.Height; y += step) {
      unsigned char* row = canvas + (static_cast<long long>(d.Top) + y) * cw + d.Left;
      if (DGifGetLine(gif, row, d.Width) == GIF_ERROR) {
        fail(out, "decoding the first frame", gif->Error);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

void decode_gif(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out) {
  GifSource src{data, size, 0};
  int err = 0;
  GifFileType* gif = DGifOpen(&src, gif_read, &err);
  if (gif == nullptr) return fail(out, "reading the header", err);
  unsigned char* canvas = nullptr;
  int transparent = -1;
  if (read_to_first_frame(gif, &transparent, out)) {
    const GifImageDesc& d = gif->Image;
    const long long cw = d.Left + d.Width > gif->SWidth ? d.Left + d.Width : gif->SWidth;
    const long long ch = d.Top + d.Height > gif->SHeight ? d.Top + d.Height : gif->SHeight;
    if (cw <= 0 || ch <= 0 || d.Width < 0 || d.Height < 0) {
      std::snprintf(out->error, sizeof(out->error), "empty image (%lldx%lld)", cw, ch);
    } else if (cw * ch > max_pixels) {
      std::snprintf(out->error, sizeof(out->error),
                    "%lldx%lld = %lld pixels exceeds the limit of %lld", cw, ch, cw * ch,
                    max_pixels);
    } else if ((canvas = static_cast<unsigned char*>(std::malloc(cw * ch))) == nullptr ||
               (out->rgb = static_cast<unsigned char*>(std::malloc(cw * ch * 3))) == nullptr) {
      std::snprintf(out->error, sizeof(out->error), "out of memory for %lldx%lld pixels", cw, ch);
    } else {
      std::memset(canvas, transparent >= 0 ? transparent : 0, cw * ch);
      if (read_frame(gif, canvas, cw, out)) {
        const ColorMapObject* map = d.ColorMap != nullptr ? d.ColorMap : gif->SColorMap;
        if (map != nullptr && is_grey_ramp(map)) map = nullptr;
        for (long long i = 0; i < cw * ch; ++i) {
          const int v = canvas[i];
          unsigned char* px = out->rgb + 3 * i;
          if (map == nullptr) {
            px[0] = px[1] = px[2] = static_cast<unsigned char>(v);
          } else if (v < map->ColorCount) {
            px[0] = map->Colors[v].Red, px[1] = map->Colors[v].Green, px[2] = map->Colors[v].Blue;
          } else {
            px[0] = px[1] = px[2] = 0;
          }
        }
        out->width = static_cast<int>(cw);
        out->height = static_cast<int>(ch);
      } else {
        std::free(out->rgb);
        out->rgb = nullptr;
      }
    }
  }
  std::free(canvas);
  if (out->rgb == nullptr && out->error[0] == 0)
    std::snprintf(out->error, sizeof(out->error), "decoding failed");
  DGifCloseFile(gif, &err);
}

}  // namespace dsv41::vision::codecs
