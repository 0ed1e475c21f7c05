// `dsv41 image`: how the model sees one image file (spec §7, docs/vision.md). Decodes it, sizes
// it for the model's vision_config, letterboxes and patches it, and with --encode runs the vision
// tower (CPU reference) over it; prints one JSON object (sizes, span length, timings, span
// statistics). --dump DIR writes every stage as raw little-endian arrays for outside comparison
// (tools/oracle/vision_oracle.py): source.rgb and letterbox.rgb u8 [h, w, 3], patches.f32
// [patches, 3·p²], span.f32 [positions, hidden] (with --encode), layout.json.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "config/model_config.hpp"
#include "core/check.hpp"
#include "core/thread_pool.hpp"
#include "loader/checkpoint.hpp"
#include "vision/bicubic_resize.hpp"
#include "vision/image_decoder.hpp"
#include "vision/image_patches.hpp"
#include "vision/vision_tower.hpp"

namespace {

using dsv41::cli::Args;
using dsv41::cli::UsageError;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DSV41_CHECK(in.good(), kNotFound, "{}: cannot open", path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  DSV41_CHECK(out.good(), kIo, "{}: write failed", path);
}

template <typename T>
T take(dsv41::Result<T> r) {
  if (!r.is_ok()) dsv41::detail::fail(r.status().code(), r.status().message(), __FILE__, __LINE__);
  return std::move(r).value();
}

int run_image(const Args& args) {
  args.allow({"model", "file", "encode", "dump", "threads", "max-pixels"});
  const std::string dir = args.require("model");
  const std::string file = args.require("file");
  const bool encode = args.flag("encode");
  const std::optional<std::string> dump = args.get("dump");
  const int64_t threads = args.get_int("threads", 0);
  const int64_t max_pixels = args.get_int("max-pixels", int64_t{1} << 25);
  if (threads < 0) throw UsageError("--threads must be >= 0");
  if (max_pixels < 1) throw UsageError("--max-pixels must be >= 1");

  const dsv41::ModelConfig cfg = take(dsv41::ModelConfig::load(dir));
  DSV41_CHECK(cfg.has_vision, kUnsupported, "{}/config.json has no vision_config", dir);
  const dsv41::VisionConfig& v = cfg.vision;
  auto t0 = Clock::now();
  const std::vector<uint8_t> bytes = read_file(file);
  const dsv41::vision::RgbImage source = take(dsv41::vision::decode_image(bytes, max_pixels));
  const double decode_s = since(t0);
  t0 = Clock::now();
  const dsv41::vision::ImagePatches patches = take(dsv41::vision::make_patches(source, v));
  const double preprocess_s = since(t0);
  const dsv41::vision::ImageLayout& l = patches.layout;

  std::vector<float> span;
  double encode_s = 0;
  if (encode) {
    auto ck = dsv41::Checkpoint::open(dir);
    dsv41::ThreadPool pool(static_cast<size_t>(threads));
    dsv41::vision::VisionTower tower(*ck, cfg, pool);
    t0 = Clock::now();
    span = tower.span(patches);
    encode_s = since(t0);
  }
  if (dump) {
    std::filesystem::create_directories(*dump);
    write_file(*dump + "/source.rgb", source.rgb.data(), source.rgb.size());
    // The letterbox stage again (make_patches keeps only the patches).
    const dsv41::vision::RgbImage boxed =
        l.stretch ? dsv41::vision::resize_bicubic(source, l.width, l.height)
                  : take(dsv41::vision::letterbox(source, l.width, l.height, {127, 127, 127}));
    write_file(*dump + "/letterbox.rgb", boxed.rgb.data(), boxed.rgb.size());
    write_file(*dump + "/patches.f32", patches.values.data(), patches.values.size() * 4);
    if (encode) write_file(*dump + "/span.f32", span.data(), span.size() * 4);
  }
  double ss = 0, max_abs = 0;
  for (float x : span) {
    ss += double(x) * x;
    max_abs = std::max(max_abs, double(std::fabs(x)));
  }
  const std::string layout = fmt::format(
      R"({{"source": [{}, {}], "size": [{}, {}], "vit_grid": [{}, {}], "llm_grid": [{}, {}], )"
      R"("stretch": {}, "positions": {}, "hidden": {}, "patch_size": {}}})",
      source.width, source.height, l.width, l.height, l.vit_h, l.vit_w, l.llm_h, l.llm_w,
      l.stretch ? "true" : "false", l.span_length(), cfg.text.hidden_size, v.patch_size);
  if (dump) write_file(*dump + "/layout.json", layout.data(), layout.size());
  std::printf(
      "{\"file\": \"%s\", \"layout\": %s, \"seconds\": {\"decode\": %.6f, \"preprocess\": %.6f, "
      "\"encode\": %.6f}, \"span_rms\": %.6g, \"span_max_abs\": %.6g}\n",
      file.c_str(), layout.c_str(), decode_s, preprocess_s, encode_s,
      span.empty() ? 0.0 : std::sqrt(ss / double(span.size())), max_abs);
  return 0;
}

const dsv41::cli::Registration image_reg{
    {"image", "--model DIR --file IMAGE [--encode] [--dump DIR] [--threads N] [--max-pixels N]",
     "decode, size, letterbox and patch an image for the model (JSON); --encode runs the vision "
     "tower, --dump writes every stage",
     &run_image}};

}  // namespace
