// Images through the public API: Model::encode_image and Session::append_image on the tiny vision
// fixture, checked against the CPU reference transformer fed the same span directly, and the
// errors of each step.
#include <catch2/catch.hpp>
#include <random>

#include "dsv41/model.hpp"
#include "dsv41/session.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"
#include "vision/image_patches.hpp"
#include "vision/vision_tower.hpp"
#include "vision_fixture.hpp"

namespace dsv41::test {
namespace {

std::vector<uint8_t> random_rgb(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(size_t{3} * w * h);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
  return b;
}

Model load_model(const std::string& dir) {
  ModelParams p;
  p.model_dir = dir;
  p.threads = 2;
  p.backend = "cpu";
  Result<Model> m = Model::load(p);
  INFO(m.status().to_string());
  REQUIRE(m.is_ok());
  return std::move(*m);
}

TEST_CASE("encode_image + append_image equal the reference forward with the span",
          "[golden][vision]") {
  const std::string dir = make_tiny8_vision();
  const Model model = load_model(dir);
  CHECK(model.info().image_encoder == "cpu");
  const std::vector<uint8_t> rgb = random_rgb(20, 14, 21);
  Result<ImageEmbedding> img = model.encode_image({20, 14, rgb});
  REQUIRE(img.is_ok());
  CHECK(img->rows() == 3);
  CHECK(img->cols() == 4);
  CHECK(img->positions() == 17);
  CHECK(img->embedding_dim() == 96);
  REQUIRE(img->values().size() == 17u * 96u);

  Result<Session> s = Session::create(model);
  REQUIRE(s.is_ok());
  REQUIRE(s->append(std::vector<int32_t>{0, 5, 6}).is_ok());
  Result<std::vector<float>> logits = s->append_image(*img, true);
  REQUIRE(logits.is_ok());
  Result<std::vector<float>> next = s->append(std::vector<int32_t>{7});
  REQUIRE(next.is_ok());
  CHECK(s->position() == 3 + 17 + 1);
  CHECK(s->tokens()[3] == 599);  // image_token_id at every span position

  // The same positions through the reference transformer in one call.
  auto t = Transformer::load(dir, 2);
  vision::VisionTower tower(t->checkpoint(), t->config(), t->pool());
  Result<vision::ImagePatches> p =
      vision::make_patches(vision::RgbImage{20, 14, rgb}, tower.config());
  REQUIRE(p.is_ok());
  const std::vector<float> span = tower.span(*p);
  CHECK(std::equal(span.begin(), span.end(), img->values().begin()));
  SequenceState st = t->new_sequence();
  (void)t->forward(st, std::vector<int32_t>{0, 5, 6});
  const std::vector<float> ref =
      t->forward(st, std::vector<int32_t>(17, 599), std::vector<uint8_t>(17, 1), span);
  CHECK(ref == *logits);
  CHECK(t->forward(st, std::vector<int32_t>{7}) == *next);
}

TEST_CASE("image errors: no tower, bad pixels, context overflow", "[golden][vision]") {
  const std::vector<uint8_t> rgb = random_rgb(20, 14, 2);
  {
    const Model text_only = load_model(fixture("golden/tiny8"));
    CHECK(text_only.info().image_encoder.empty());  // no tower tensors: no encoder
    Result<ImageEmbedding> e = text_only.encode_image({20, 14, rgb});
    REQUIRE(e.status().code() == ErrorCode::kUnsupported);
    CHECK_THAT(e.status().message(), Catch::Contains("no usable vision tower") &&
                                         Catch::Contains("vision.patch_embed.proj.weight"));
  }
  const Model model = load_model(make_tiny8_vision());
  Result<ImageEmbedding> short_buffer = model.encode_image({20, 15, rgb});
  REQUIRE(short_buffer.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(short_buffer.status().message(), Catch::Contains("20x15"));
  Result<ImageEmbedding> empty = model.encode_image({0, 0, {}});
  REQUIRE(empty.status().code() == ErrorCode::kInvalidArgument);

  Result<ImageEmbedding> img = model.encode_image({20, 14, rgb});
  REQUIRE(img.is_ok());
  SessionParams sp;
  sp.max_context = 10;  // the span needs 17
  Result<Session> s = Session::create(model, sp);
  REQUIRE(s.is_ok());
  Result<std::vector<float>> r = s->append_image(*img);
  REQUIRE(r.status().code() == ErrorCode::kContextOverflow);
  CHECK_THAT(r.status().message(), Catch::Contains("17 tokens at position 0"));
  CHECK(s->position() == 0);
}

}  // namespace
}  // namespace dsv41::test

namespace dsv41::test {
namespace {

TEST_CASE("expand_image_placeholders repeats each placeholder into its span", "[golden][vision]") {
  std::vector<int32_t> prompt = {0, 9, 5, 9, 6};
  const std::vector<int64_t> positions = {3, 2};
  Result<std::vector<int64_t>> offsets = expand_image_placeholders(prompt, 9, positions);
  REQUIRE(offsets.is_ok());
  CHECK(*offsets == std::vector<int64_t>{1, 5});
  CHECK(prompt == std::vector<int32_t>{0, 9, 9, 9, 5, 9, 9, 6});
  // Wrong count or size: an error naming both counts, the prompt untouched.
  std::vector<int32_t> p2 = {0, 9, 5};
  Result<std::vector<int64_t>> bad = expand_image_placeholders(p2, 9, positions);
  REQUIRE(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("1 image placeholders (token id 9) for 2"));
  CHECK(p2 == std::vector<int32_t>{0, 9, 5});
  const std::vector<int64_t> zero = {0};
  Result<std::vector<int64_t>> z = expand_image_placeholders(p2, 9, zero);
  REQUIRE_FALSE(z.is_ok());
  CHECK_THAT(z.status().message(), Catch::Contains("image 0 takes 0 positions (must be >= 1)"));
  CHECK(p2 == std::vector<int32_t>{0, 9, 5});
  // A span no prompt can hold: an error, not a length_error / bad_alloc through the API.
  for (const int64_t huge : {INT64_MAX, int64_t{1} << 26}) {
    const std::vector<int64_t> far = {huge};
    Result<std::vector<int64_t>> h = expand_image_placeholders(p2, 9, far);
    REQUIRE(h.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(h.status().message(),
               Catch::Contains("image 0 takes " + std::to_string(huge) +
                               " positions: the expanded prompt would exceed 67108864 tokens"));
    CHECK(p2 == std::vector<int32_t>{0, 9, 5});
  }
}

}  // namespace
}  // namespace dsv41::test
