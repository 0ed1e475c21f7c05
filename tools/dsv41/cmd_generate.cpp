// `dsv41 generate` (stream a completion through the Engine) and `dsv41 predict` (top next-token
// predictions for a prompt, the README's first demo).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <iterator>
#include <numeric>

#include "cli_args.hpp"
#include "dsv41/engine.hpp"
#include "dsv41/image.hpp"
#include "dsv41/model.hpp"
#include "dsv41/session.hpp"

namespace {

using dsv41::cli::Args;
using dsv41::cli::UsageError;

dsv41::Model load_model(const Args& args) {
  dsv41::ModelParams mp;
  mp.model_dir = args.require("model");
  mp.threads = static_cast<int>(args.get_int("threads", 0));
  auto m = dsv41::Model::load(mp);
  if (!m) throw std::runtime_error(m.status().to_string());
  return std::move(m).value();
}

std::vector<int32_t> prompt_ids(const Args& args, const dsv41::Model& model) {
  if (args.has("ids") == args.has("prompt"))
    throw UsageError("give exactly one of --prompt, --ids");
  if (args.has("ids")) return Args::parse_ids("ids", args.require("ids"));
  auto ids = model.tokenize(args.require("prompt"), /*parse_special=*/true);
  if (!ids) throw std::runtime_error(ids.status().to_string());
  if (ids->empty()) throw UsageError("--prompt tokenizes to no tokens");
  return *ids;
}

// --image FILE: the prompt's one image placeholder (the config's image_token_id, e.g.
// <｜deepseek_image｜> in --prompt) becomes the image's span (docs/vision.md).
void attach_image(const Args& args, const dsv41::Model& model, dsv41::GenerationRequest& req) {
  const std::string file = args.require("image");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file + ": cannot open");
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>()};
  auto decoded = dsv41::decode_image(bytes);
  if (!decoded) throw std::runtime_error(file + ": " + decoded.status().message());
  auto image = model.encode_image(decoded->pixels());
  if (!image) throw std::runtime_error(image.status().to_string());
  const int32_t id = model.info().image_token_id;
  const int64_t positions = image->positions();
  auto offsets = dsv41::expand_image_placeholders(req.prompt, id, std::span(&positions, 1));
  if (!offsets)
    throw UsageError("with --image the prompt needs exactly one image placeholder (token id " +
                     std::to_string(id) + ", <｜deepseek_image｜>) where the image goes");
  req.images.push_back(
      {offsets->front(), std::make_shared<const dsv41::ImageEmbedding>(std::move(image).value())});
}

int run_generate(const Args& args) {
  args.allow({"model", "prompt", "ids", "max-tokens", "temperature", "top-k", "top-p", "min-p",
              "seed", "stop", "ignore-eos", "threads", "show-ids", "image"});
  dsv41::Model model = load_model(args);
  dsv41::GenerationRequest req;
  req.prompt = prompt_ids(args, model);
  if (args.has("image")) attach_image(args, model, req);
  req.sampling.temperature = static_cast<float>(args.get_float("temperature", 0.0));
  req.sampling.top_k = static_cast<int32_t>(args.get_int("top-k", 0));
  req.sampling.top_p = static_cast<float>(args.get_float("top-p", 1.0));
  req.sampling.min_p = static_cast<float>(args.get_float("min-p", 0.0));
  if (args.has("seed")) req.sampling.seed = args.get_int("seed", 0);
  req.stop.max_tokens = args.get_int("max-tokens", 64);
  if (auto s = args.get("stop")) req.stop.stop.push_back(*s);
  req.stop.ignore_eos = args.flag("ignore-eos");
  const bool show_ids = args.flag("show-ids");
  auto engine = dsv41::Engine::create(model);
  if (!engine) throw std::runtime_error(engine.status().to_string());
  std::promise<dsv41::GenerationEvent> done;
  auto id = engine->submit(req, [&](const dsv41::GenerationEvent& ev) {
    if (show_ids && ev.kind == dsv41::GenerationEvent::Kind::kToken) std::printf("[%d]", ev.token);
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    if (ev.kind == dsv41::GenerationEvent::Kind::kFinished) done.set_value(ev);
  });
  if (!id) throw std::runtime_error(id.status().to_string());
  dsv41::GenerationEvent last = done.get_future().get();
  if (!last.status.is_ok()) throw std::runtime_error(last.status.to_string());
  std::fprintf(stderr, "\n[finish: %s, prompt %lld tokens, completion %lld tokens]\n",
               dsv41::finish_reason_name(last.finish), static_cast<long long>(last.prompt_tokens),
               static_cast<long long>(last.completion_tokens));
  return 0;
}

int run_predict(const Args& args) {
  args.allow({"model", "prompt", "ids", "top", "threads"});
  dsv41::Model model = load_model(args);
  const std::vector<int32_t> ids = prompt_ids(args, model);
  const int64_t top = args.get_int("top", 5);
  if (top < 1) throw UsageError("--top must be >= 1");
  auto session = dsv41::Session::create(model);
  if (!session) throw std::runtime_error(session.status().to_string());
  auto logits = session->append(ids);
  if (!logits) throw std::runtime_error(logits.status().to_string());
  const std::vector<float>& z = *logits;
  const float zmax = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (float v : z) sum += std::exp(static_cast<double>(v - zmax));
  std::vector<int32_t> order(z.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min<size_t>(static_cast<size_t>(top), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                    [&](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  auto text = model.detokenize(ids);
  std::printf("model %s, prompt %zu tokens: %s\nnext-token predictions (CPU reference):\n",
              model.info().model_dir.c_str(), ids.size(), text ? text->c_str() : "?");
  for (size_t i = 0; i < k; ++i) {
    const int32_t t = order[i];
    auto piece = model.detokenize(std::span<const int32_t>(&t, 1));
    std::printf("  %2zu. id %6d  p=%.4f  logit=%8.4f  %s\n", i + 1, t,
                std::exp(static_cast<double>(z[t] - zmax)) / sum, z[t],
                piece ? ("\"" + *piece + "\"").c_str() : "");
  }
  return 0;
}

const dsv41::cli::Registration reg_generate{
    {"generate",
     "--model DIR (--prompt TEXT | --ids 0,1,2) [--max-tokens N] [--temperature T] [--top-k K] "
     "[--top-p P] [--min-p P] [--seed S] [--stop STR] [--ignore-eos] [--show-ids] [--threads N] "
     "[--image FILE]",
     "stream a completion (greedy by default) through the engine; --image puts a PNG/JPEG at the "
     "prompt's <｜deepseek_image｜>",
     &run_generate}};
const dsv41::cli::Registration reg_predict{
    {"predict", "--model DIR (--prompt TEXT | --ids ...) [--top N] [--threads N]",
     "print the most likely next tokens of a prompt", &run_predict}};

}  // namespace
