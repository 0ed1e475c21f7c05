// The image calls of the C ABI (dsv41.h "images") on the tiny vision fixture: the same logits as
// the C++ API, the buffer rule, and every NULL / bad-input path named.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "dsv41/dsv41.h"
#include "support/fixtures.hpp"
#include "support/png_writer.hpp"
#include "vision_fixture.hpp"

namespace dsv41::test {
namespace {

std::string last_error() { return dsv41_last_error_message(); }

void require_status(dsv41_status st, dsv41_status want, const std::string& needle) {
  INFO("status " << dsv41_status_name(st) << " (want " << dsv41_status_name(want)
                 << "), message: " << last_error());
  REQUIRE(st == want);
  REQUIRE(last_error().find(needle) != std::string::npos);
}

dsv41_model* load(const std::string& dir) {
  dsv41_model_params p = dsv41_model_default_params();
  p.model_dir = dir.c_str();
  p.threads = 1;
  p.backend = "cpu";
  dsv41_model* m = nullptr;
  const dsv41_status st = dsv41_model_load(&p, &m);
  INFO(last_error());
  REQUIRE(st == DSV41_OK);
  return m;
}

std::vector<uint8_t> random_rgb(int w, int h) {
  std::mt19937 rng(4);
  std::vector<uint8_t> b(size_t{3} * w * h);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
  return b;
}

TEST_CASE("C ABI: encode an image and append it to a session", "[golden][vision]") {
  dsv41_model* model = load(make_tiny8_vision());
  const std::vector<uint8_t> rgb = random_rgb(20, 14);
  dsv41_image* image = nullptr;
  REQUIRE(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, &image) == DSV41_OK);
  CHECK(dsv41_image_positions(image) == 17);
  CHECK(dsv41_image_positions(nullptr) == -1);

  dsv41_session_params sp = dsv41_session_default_params();
  dsv41_session* s = nullptr;
  REQUIRE(dsv41_session_create(model, &sp, &s) == DSV41_OK);
  const int32_t bos = 0;
  size_t n = 0;
  std::vector<float> logits(600);
  REQUIRE(dsv41_session_append(s, &bos, 1, 0, logits.data(), logits.size(), &n) == DSV41_OK);
  // Size query first: capacity 0 commits the span and reports the size.
  require_status(dsv41_session_append_image(s, image, 0, nullptr, 0, &n),
                 DSV41_ERR_BUFFER_TOO_SMALL, "600 logits do not fit capacity 0");
  CHECK(n == 600);
  CHECK(dsv41_session_position(s) == 18);
  REQUIRE(dsv41_session_rollback(s, 16) == DSV41_OK);  // rollback depth 16
  REQUIRE(dsv41_session_reset(s) == DSV41_OK);
  REQUIRE(dsv41_session_append(s, &bos, 1, 0, logits.data(), logits.size(), &n) == DSV41_OK);
  REQUIRE(dsv41_session_append_image(s, image, 0, logits.data(), logits.size(), &n) == DSV41_OK);
  CHECK(dsv41_session_position(s) == 18);

  // Errors, each named.
  dsv41_image* none = reinterpret_cast<dsv41_image*>(1);
  require_status(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 15, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "20x15");
  CHECK(none == nullptr);
  require_status(dsv41_model_encode_image(nullptr, rgb.data(), rgb.size(), 20, 14, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "model is NULL");
  require_status(dsv41_model_encode_image(model, nullptr, 12, 2, 2, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "rgb is NULL");
  require_status(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "out is NULL");
  require_status(dsv41_session_append_image(s, nullptr, 0, logits.data(), 600, &n),
                 DSV41_ERR_INVALID_ARGUMENT, "image is NULL");
  require_status(dsv41_session_append_image(nullptr, image, 0, logits.data(), 600, &n),
                 DSV41_ERR_INVALID_ARGUMENT, "session is NULL");
  require_status(dsv41_session_append_image(s, image, 0, nullptr, 600, &n),
                 DSV41_ERR_INVALID_ARGUMENT, "logits is NULL");
  require_status(dsv41_session_append_image(s, image, 0, logits.data(), 600, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "n_out is NULL");
  dsv41_session_free(s);
  dsv41_image_free(image);
  dsv41_image_free(nullptr);
  dsv41_model_free(model);
}

TEST_CASE("C ABI: encode a PNG file's bytes", "[golden][vision]") {
  dsv41_model* model = load(make_tiny8_vision());
  const std::vector<uint8_t> rgb = random_rgb(20, 14);
  const std::string png = write_rgb_png(20, 14, rgb);
  const auto* bytes = reinterpret_cast<const uint8_t*>(png.data());
  dsv41_image* from_file = nullptr;
  dsv41_image* from_pixels = nullptr;
  REQUIRE(dsv41_model_encode_image_file(model, bytes, png.size(), 0, &from_file) == DSV41_OK);
  REQUIRE(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, &from_pixels) ==
          DSV41_OK);
  CHECK(dsv41_image_positions(from_file) == 17);
  // Same pixels, same logits.
  dsv41_session_params sp = dsv41_session_default_params();
  std::vector<std::vector<float>> logits;
  for (dsv41_image* img : {from_file, from_pixels}) {
    dsv41_session* s = nullptr;
    REQUIRE(dsv41_session_create(model, &sp, &s) == DSV41_OK);
    std::vector<float> out(600);
    size_t n = 0;
    REQUIRE(dsv41_session_append_image(s, img, 0, out.data(), out.size(), &n) == DSV41_OK);
    logits.push_back(out);
    dsv41_session_free(s);
  }
  CHECK(logits[0] == logits[1]);
  dsv41_image* none = nullptr;
  require_status(dsv41_model_encode_image_file(model, bytes, png.size(), 279, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "20x14 = 280 pixels exceeds the limit of 279");
  require_status(dsv41_model_encode_image_file(model, bytes, 30, 0, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "PNG");
  require_status(dsv41_model_encode_image_file(model, nullptr, 5, 0, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "bytes is NULL");
  require_status(dsv41_model_encode_image_file(model, bytes, png.size(), -1, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "max_pixels is negative");
  CHECK(none == nullptr);
  dsv41_image_free(from_file);
  dsv41_image_free(from_pixels);
  dsv41_model_free(model);
}

TEST_CASE("C ABI: a text-only checkpoint refuses images", "[golden][vision]") {
  dsv41_model* model = load(fixture("golden/tiny8"));
  const std::vector<uint8_t> rgb = random_rgb(4, 4);
  dsv41_image* image = nullptr;
  require_status(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 4, 4, &image),
                 DSV41_ERR_UNSUPPORTED, "no usable vision tower");
  CHECK(image == nullptr);
  dsv41_model_free(model);
}

}  // namespace
}  // namespace dsv41::test
