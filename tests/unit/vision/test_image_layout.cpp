// Image sizing (spec §7.2 steps 1-4). Expected values come from the serving reference's own
// sizing functions (vLLM deepseek_v41/common/mm_preprocess.py: llm_grid, solve_resize_ratio,
// safe_resize and the sizing lines of load_image), run in CPython on the released vision config.
#include <catch2/catch.hpp>

#include "vision/image_layout.hpp"

namespace dsv41::vision {
namespace {

struct Case {
  int src_w, src_h, width, height, vit_h, vit_w, llm_h, llm_w;
};

// Released config: patch 14, downsample 3, max 1024 tokens, min_pixels 544².
constexpr Case kReleased[] = {
    {1, 1, 546, 546, 39, 39, 13, 13},           // sized up to min_pixels
    {544, 544, 546, 546, 39, 39, 13, 13},       // exactly min_pixels, rounded up to 14
    {100, 50, 770, 392, 28, 55, 10, 19},        // sized up, truncated sides
    {4000, 3000, 1512, 1134, 81, 108, 27, 36},  // shrunk to the token budget
    {1920, 1080, 1708, 966, 69, 122, 23, 41},  {1080, 1920, 966, 1708, 122, 69, 41, 23},
    {10000, 10, 17206, 28, 2, 1229, 1, 410},   {10, 10000, 28, 17206, 1229, 2, 410, 1},
    {100000, 1, 42882, 42, 3, 3063, 1, 1021},  // very wide: one row of 1021
    {1, 100000, 42, 21462, 1533, 3, 511, 1},   // very tall: one column of 511
    {3024, 4032, 1134, 1512, 108, 81, 36, 27}, {640, 480, 644, 490, 35, 46, 12, 16},
    {2000, 2000, 1302, 1302, 93, 93, 31, 31},  {700, 300, 840, 364, 26, 60, 9, 20},
    {13, 7, 742, 406, 29, 53, 10, 18},         {42882, 42, 42882, 42, 3, 3063, 1, 1021},
    {2000, 1, 24332, 14, 1, 1738, 1, 580},     {1366, 768, 1372, 770, 55, 98, 19, 33},
    {5000, 5000, 1302, 1302, 93, 93, 31, 31},
};

// The layout of one case, every field, and the span within the budget.
void check_case(const Case& c, const VisionConfig& v) {
  INFO("source " << c.src_w << "x" << c.src_h);
  Result<ImageLayout> l = image_layout(c.src_w, c.src_h, v);
  REQUIRE(l.is_ok());
  CHECK(l->width == c.width);
  CHECK(l->height == c.height);
  CHECK(l->vit_h == c.vit_h);
  CHECK(l->vit_w == c.vit_w);
  CHECK(l->llm_h == c.llm_h);
  CHECK(l->llm_w == c.llm_w);
  CHECK(l->span_length() == int64_t{c.llm_h} * (c.llm_w + 1) + 2);
  CHECK(l->span_length() <= v.max_image_tokens);
  CHECK_FALSE(l->stretch);
}

TEST_CASE("image layout matches the reference sizing on the released config", "[unit]") {
  const VisionConfig v;
  for (const Case& c : kReleased) check_case(c, v);
}

TEST_CASE("image layout on a tiny config (patch 2, max 40 tokens, min 36 pixels)", "[unit]") {
  VisionConfig v;
  v.patch_size = 2;
  v.max_image_tokens = 40;
  v.min_pixels = 36;
  constexpr Case kTiny[] = {{1, 1, 6, 6, 3, 3, 1, 1},    {5, 3, 8, 4, 2, 4, 1, 2},
                            {7, 7, 8, 8, 4, 4, 2, 2},    {20, 4, 20, 4, 2, 10, 1, 4},
                            {3, 50, 4, 50, 25, 2, 9, 1}, {100, 100, 30, 30, 15, 15, 5, 5}};
  for (const Case& c : kTiny) check_case(c, v);
}

TEST_CASE("image layout with max_wh_ratio caps the width and stretches", "[unit]") {
  VisionConfig v;
  v.max_wh_ratio = 2.0;
  Result<ImageLayout> wide = image_layout(3000, 500, v);  // width capped to 1000 for sizing
  REQUIRE(wide.is_ok());
  CHECK(wide->stretch);
  Result<ImageLayout> same = image_layout(1000, 500, v);
  REQUIRE(same.is_ok());
  CHECK(same->stretch);  // width >= ratio · height: the reference stretches here too
  CHECK(wide->width == same->width);
  CHECK(wide->height == same->height);
  Result<ImageLayout> narrow = image_layout(999, 500, v);
  REQUIRE(narrow.is_ok());
  CHECK_FALSE(narrow->stretch);
}

TEST_CASE("image layout rejects empty and oversized sides by size", "[unit]") {
  const VisionConfig v;
  for (auto [w, h] : {std::pair<int64_t, int64_t>{0, 10},
                      {10, 0},
                      {-3, 5},
                      {kMaxImageSide + 1, 5},
                      {5, kMaxImageSide + 1}}) {
    Result<ImageLayout> l = image_layout(w, h, v);
    REQUIRE_FALSE(l.is_ok());
    CHECK(l.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(l.status().message(), Catch::Contains(std::to_string(w) + "x" + std::to_string(h)));
  }
}

}  // namespace
}  // namespace dsv41::vision
