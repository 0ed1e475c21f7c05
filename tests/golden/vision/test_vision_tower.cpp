// The vision tower's CPU reference on the tiny vision fixture (vision_fixture.hpp): the ViT,
// merge, aligner and span against a double-precision recomputation written straight from spec
// §7.3-7.4, the span's layout, the image embeddings' path into the text model (§7.4 step 4),
// and the errors for missing tensors and mismatched embeddings.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "core/check.hpp"
#include "loader/safetensors.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"
#include "support/tolerance.hpp"
#include "vision/image_patches.hpp"
#include "vision/vision_tower.hpp"
#include "vision_fixture.hpp"

namespace dsv41::test {
namespace {

using vision::ImagePatches;
using vision::RgbImage;
using vision::VisionTower;
using V = TinyVision;
using Vec = std::vector<double>;

RgbImage random_image(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage im{w, h, std::vector<uint8_t>(size_t{3} * w * h)};
  for (uint8_t& b : im.rgb) b = static_cast<uint8_t>(rng() & 0xFF);
  return im;
}

// ---- double-precision recomputation of spec §7.3-7.4 ----

struct Ref {
  const Checkpoint& ck;
  Vec get(const std::string& name) const {
    const std::vector<float> f = tensor_to_f32(ck.get(name));
    return Vec(f.begin(), f.end());
  }
  // y [n, out] = x [n, in] · Wᵀ (+ b).
  Vec linear(const Vec& x, int64_t n, const std::string& w, int64_t out, int64_t in,
             const std::string& b = "") const {
    const Vec W = get(w), B = b.empty() ? Vec(out, 0.0) : get(b);
    Vec y(n * out);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double s = B[o];
        for (int64_t i = 0; i < in; ++i) s += x[t * in + i] * W[o * in + i];
        y[t * out + o] = s;
      }
    return y;
  }
  Vec rms(const Vec& x, int64_t n, int64_t d, const std::string& w) const {
    const Vec W = get(w);
    Vec y(x.size());
    for (int64_t t = 0; t < n; ++t) {
      double ms = 0;
      for (int64_t i = 0; i < d; ++i) ms += x[t * d + i] * x[t * d + i];
      const double inv = 1.0 / std::sqrt(ms / d + 1e-6);
      for (int64_t i = 0; i < d; ++i) y[t * d + i] = x[t * d + i] * inv * W[i];
    }
    return y;
  }
};

Vec reference_span(const Checkpoint& ck, const ImagePatches& p) {
  const Ref r{ck};
  const int64_t n = p.layout.patches(), h = V::kHidden, hd = h / V::kHeads, half = hd / 2;
  const int64_t patch_in = 3 * V::kPatch * V::kPatch;
  Vec x = r.linear(Vec(p.values.begin(), p.values.end()), n, "vision.patch_embed.proj.weight", h,
                   patch_in, "vision.patch_embed.proj.bias");
  // 2D RoPE: channel i pairs with i + hd/2; angle i < hd/4 is row·θ_i, else col·θ_{i - hd/4}.
  auto angle = [&](int64_t t, int64_t i) {
    const int64_t row = t / p.layout.vit_w, col = t % p.layout.vit_w, q = hd / 4;
    const double theta = std::pow(10000.0, -2.0 * static_cast<double>(i % q) / (hd / 2));
    return static_cast<double>(i < q ? row : col) * theta;
  };
  for (int b = 0; b < V::kLayers; ++b) {
    const std::string pre = "vision.blocks." + std::to_string(b) + ".";
    Vec qkv = r.linear(r.rms(x, n, h, pre + "norm1.weight"), n, pre + "attn.wqkv.weight", 3 * h, h,
                       pre + "attn.wqkv.bias");
    for (int64_t t = 0; t < n; ++t)
      for (int64_t part = 0; part < 2; ++part)  // q, k
        for (int64_t hh = 0; hh < V::kHeads; ++hh) {
          double* v = &qkv[t * 3 * h + part * h + hh * hd];
          for (int64_t i = 0; i < half; ++i) {
            const double a = angle(t, i), x1 = v[i], x2 = v[i + half];
            v[i] = x1 * std::cos(a) - x2 * std::sin(a);
            v[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
          }
        }
    Vec att(n * h, 0.0);
    for (int64_t hh = 0; hh < V::kHeads; ++hh)
      for (int64_t i = 0; i < n; ++i) {
        Vec s(n);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (int64_t c = 0; c < hd; ++c)
            d += qkv[i * 3 * h + hh * hd + c] * qkv[j * 3 * h + h + hh * hd + c];
          s[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t c = 0; c < hd; ++c)
            att[i * h + hh * hd + c] += s[j] / sum * qkv[j * 3 * h + 2 * h + hh * hd + c];
      }
    const Vec o = r.linear(att, n, pre + "attn.wo.weight", h, h, pre + "attn.wo.bias");
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const Vec gu =
        r.linear(r.rms(x, n, h, pre + "norm2.weight"), n, pre + "mlp.w1.weight", 2 * V::kInter, h);
    Vec act(n * V::kInter);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < V::kInter; ++i) {
        const double g = gu[t * 2 * V::kInter + i], u = gu[t * 2 * V::kInter + V::kInter + i];
        act[t * V::kInter + i] = g / (1 + std::exp(-g)) * u;
      }
    const Vec m = r.linear(act, n, pre + "mlp.w2.weight", h, V::kInter);
    for (size_t i = 0; i < x.size(); ++i) x[i] += m[i];
  }
  x = r.rms(x, n, h, "vision.norm.weight");
  // Merge: cell (bi, bj) flattened (channel, dy, dx), zero outside the grid.
  const int R = V::kDownsample, vh = p.layout.vit_h, vw = p.layout.vit_w;
  const int64_t rows = p.layout.image_tokens(), width = h * R * R, D = V::kTextDim;
  Vec merged(rows * width, 0.0);
  for (int64_t cell = 0; cell < rows; ++cell) {
    const int64_t bi = cell / p.layout.llm_w, bj = cell % p.layout.llm_w;
    for (int64_t c = 0; c < h; ++c)
      for (int dy = 0; dy < R; ++dy)
        for (int dx = 0; dx < R; ++dx) {
          const int64_t y = bi * R + dy, xx = bj * R + dx;
          if (y < vh && xx < vw)
            merged[cell * width + c * R * R + dy * R + dx] = x[(y * vw + xx) * h + c];
        }
  }
  Vec hid = r.linear(merged, rows, "aligner.w1.weight", D, width, "aligner.w1.bias");
  for (double& v : hid) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  const Vec out = r.linear(hid, rows, "aligner.w2.weight", D, D, "aligner.w2.bias");
  Vec span;
  const Vec start = r.get("image_start"), nl = r.get("image_newline"), end = r.get("image_end");
  span.insert(span.end(), start.begin(), start.end());
  for (int64_t row = 0; row < p.layout.llm_h; ++row) {
    span.insert(span.end(), out.begin() + row * p.layout.llm_w * D,
                out.begin() + (row + 1) * p.layout.llm_w * D);
    span.insert(span.end(), nl.begin(), nl.end());
  }
  span.insert(span.end(), end.begin(), end.end());
  return span;
}

struct Loaded {
  std::unique_ptr<Transformer> t;
  std::unique_ptr<VisionTower> tower;
};

Loaded load(const std::string& dir) {
  Loaded l;
  l.t = Transformer::load(dir, 2);
  l.tower = std::make_unique<VisionTower>(l.t->checkpoint(), l.t->config(), l.t->pool());
  return l;
}

TEST_CASE("vision tower span matches the spec recomputation", "[golden][vision]") {
  const Loaded m = load(make_tiny8_vision());
  // 20x14 fills its layout exactly (vit 7x10: the merge pads both edges); 9x31 is letterboxed.
  for (auto [w, h] : {std::pair{20, 14}, {9, 31}}) {
    INFO("image " << w << "x" << h);
    Result<ImagePatches> p = vision::make_patches(random_image(w, h, 11), m.tower->config());
    REQUIRE(p.is_ok());
    const std::vector<float> span = m.tower->span(*p);
    REQUIRE(static_cast<int64_t>(span.size()) == p->layout.span_length() * V::kTextDim);
    const Vec want = reference_span(m.t->checkpoint(), *p);
    require_close("span", span, want, want.size(), 2e-4);
  }
}

TEST_CASE("vision span layout: delimiters at the start, row ends and end", "[golden][vision]") {
  const std::string dir = make_tiny8_vision();
  const Loaded m = load(dir);
  Result<ImagePatches> p = vision::make_patches(random_image(20, 14, 3), m.tower->config());
  REQUIRE(p.is_ok());
  REQUIRE(p->layout.llm_h == 3);
  REQUIRE(p->layout.llm_w == 4);
  const std::vector<float> span = m.tower->span(*p);
  REQUIRE(span.size() == 17u * V::kTextDim);
  const std::vector<float> start = tensor_to_f32(m.t->checkpoint().get("image_start"));
  const std::vector<float> nl = tensor_to_f32(m.t->checkpoint().get("image_newline"));
  const std::vector<float> end = tensor_to_f32(m.t->checkpoint().get("image_end"));
  auto row = [&](int i) {
    return std::vector<float>(span.begin() + i * V::kTextDim, span.begin() + (i + 1) * V::kTextDim);
  };
  CHECK(row(0) == start);
  for (int r = 0; r < 3; ++r) CHECK(row(1 + r * 5 + 4) == nl);
  CHECK(row(16) == end);
  CHECK(row(1) != start);
}

TEST_CASE("vision tower with identity blocks is norm(patch embed)", "[golden][vision]") {
  // wo, its bias and w2 are zero: each block adds nothing.
  const Loaded m = load(make_tiny8_vision({}, true));
  Result<ImagePatches> p = vision::make_patches(random_image(6, 6, 5), m.tower->config());
  REQUIRE(p.is_ok());
  const std::vector<float> got = m.tower->encode(*p);
  const Ref r{m.t->checkpoint()};
  const int64_t n = p->layout.patches();
  const Vec want =
      r.rms(r.linear(Vec(p->values.begin(), p->values.end()), n, "vision.patch_embed.proj.weight",
                     V::kHidden, 12, "vision.patch_embed.proj.bias"),
            n, V::kHidden, "vision.norm.weight");
  require_close("ViT output", got, want, want.size(), 1e-5);
}

TEST_CASE("image embeddings replace the token embedding at the span positions",
          "[golden][vision]") {
  const Loaded m = load(make_tiny8_vision());
  const int image_id = m.t->config().image_token_id;
  Result<ImagePatches> p = vision::make_patches(random_image(20, 14, 9), m.tower->config());
  REQUIRE(p.is_ok());
  const std::vector<float> span = m.tower->span(*p);
  const int64_t L = p->layout.span_length(), D = m.t->dim(), V = m.t->config().text.vocab_size;
  std::vector<int32_t> ids = {0, 5, 6};
  std::vector<uint8_t> flags = {0, 0, 0};
  ids.insert(ids.end(), L, image_id);
  flags.insert(flags.end(), L, 1);
  ids.push_back(7);
  flags.push_back(0);
  const int64_t T = static_cast<int64_t>(ids.size());

  SequenceState with = m.t->new_sequence(), plain = m.t->new_sequence(), tok = m.t->new_sequence();
  const std::vector<float> a = m.t->forward(with, ids, flags, span);
  const std::vector<float> b = m.t->forward(plain, ids, flags);
  // The token embedding rows given explicitly are the plain run, bit for bit.
  std::vector<float> rows(static_cast<size_t>(L * D));
  for (int64_t i = 0; i < L; ++i) m.t->weights().embed_row(image_id, rows.data() + i * D);
  const std::vector<float> c = m.t->forward(tok, ids, flags, rows);
  CHECK(c == b);
  // Causal: logits before the span are unchanged; from the span on they differ.
  CHECK(std::equal(a.begin(), a.begin() + 3 * V, b.begin()));
  for (int64_t t = 3; t < T; ++t) {
    INFO("position " << t);
    CHECK_FALSE(std::equal(a.begin() + t * V, a.begin() + (t + 1) * V, b.begin() + t * V));
  }
  // Decoding continues after the image.
  const std::vector<float> next = m.t->forward(with, std::vector<int32_t>{8});
  REQUIRE(next.size() == static_cast<size_t>(V));
  for (float x : next) REQUIRE(std::isfinite(x));
  CHECK(with.pos == T + 1);
}

TEST_CASE("mismatched image embeddings are refused with both counts", "[golden][vision]") {
  const Loaded m = load(make_tiny8_vision());
  SequenceState st = m.t->new_sequence();
  const std::vector<int32_t> ids = {0, 599, 599, 5};
  const std::vector<uint8_t> flags = {0, 1, 1, 0};
  const std::vector<float> one_row(static_cast<size_t>(m.t->dim()));
  const Status s = detail::capture_status([&] { m.t->forward(st, ids, flags, one_row); });
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("96 image embedding values for 2 image positions"));
  CHECK(st.pos == 0);
}

TEST_CASE("a vision tower without its tensors names the first missing one", "[golden][vision]") {
  for (const char* name : {"vision.blocks.1.mlp.w2.weight", "aligner.w1.bias", "image_end"}) {
    INFO(name);
    const std::string dir = make_tiny8_vision({name});
    auto t = Transformer::load(dir, 1);
    const Status s =
        detail::capture_status([&] { VisionTower tower(t->checkpoint(), t->config(), t->pool()); });
    REQUIRE_FALSE(s.is_ok());
    CHECK_THAT(s.message(), Catch::Contains(name));
  }
  // tiny8 itself declares a vision_config but ships no tower.
  auto t = Transformer::load(fixture("golden/tiny8"), 1);
  const Status s =
      detail::capture_status([&] { VisionTower tower(t->checkpoint(), t->config(), t->pool()); });
  CHECK_THAT(s.message(), Catch::Contains("vision.patch_embed.proj.weight"));
}

}  // namespace
}  // namespace dsv41::test
