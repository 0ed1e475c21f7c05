// simple: load a model, tokenize a prompt, generate greedily through the Engine, print tokens.
//   dsv41_example_simple MODEL_DIR [PROMPT] [MAX_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [PROMPT] [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  dsv41::ModelParams mp;
  mp.model_dir = argv[1];
  auto model = dsv41::Model::load(mp);
  if (!model) {
    std::fprintf(stderr, "load: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto prompt = model->tokenize(argc > 2 ? argv[2] : "<｜begin▁of▁sentence｜>Hello,");
  if (!prompt) {
    std::fprintf(stderr, "tokenize: %s\n", prompt.status().to_string().c_str());
    return 1;
  }
  auto engine = dsv41::Engine::create(*model);
  if (!engine) {
    std::fprintf(stderr, "engine: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  dsv41::GenerationRequest req;
  req.prompt = *prompt;
  req.sampling.temperature = 0.0f;  // greedy
  req.stop.max_tokens = argc > 3 ? std::atoll(argv[3]) : 12;
  std::promise<dsv41::GenerationEvent> done;
  auto id = engine->submit(req, [&](const dsv41::GenerationEvent& ev) {
    if (ev.kind == dsv41::GenerationEvent::Kind::kToken) {
      std::printf("%d ", ev.token);
      std::fflush(stdout);
    } else {
      done.set_value(ev);
    }
  });
  if (!id) {
    std::fprintf(stderr, "submit: %s\n", id.status().to_string().c_str());
    return 1;
  }
  dsv41::GenerationEvent last = done.get_future().get();
  std::printf("\nfinish: %s (%s), %lld tokens\n", dsv41::finish_reason_name(last.finish),
              last.status.to_string().c_str(), static_cast<long long>(last.completion_tokens));
  return last.status.is_ok() ? 0 : 1;
}
