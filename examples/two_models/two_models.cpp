// two_models: two Models in one process (no global state), each with its own Engine, generating
// concurrently; prints both greedy continuations.
//   dsv41_example_two_models MODEL_DIR_A MODEL_DIR_B [MAX_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <future>
#include <vector>

#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"

namespace {
struct Run {
  std::vector<int32_t> tokens;
  std::promise<dsv41::Status> done;
};
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR_A MODEL_DIR_B [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  std::vector<dsv41::Model> models;
  std::vector<dsv41::Engine> engines;
  for (int i = 1; i <= 2; ++i) {
    dsv41::ModelParams mp;
    mp.model_dir = argv[i];
    auto m = dsv41::Model::load(mp);
    if (!m) {
      std::fprintf(stderr, "load %s: %s\n", argv[i], m.status().to_string().c_str());
      return 1;
    }
    models.push_back(std::move(m).value());
    auto e = dsv41::Engine::create(models.back());
    if (!e) {
      std::fprintf(stderr, "engine: %s\n", e.status().to_string().c_str());
      return 1;
    }
    engines.push_back(std::move(e).value());
  }
  Run runs[2];
  for (int i = 0; i < 2; ++i) {
    dsv41::GenerationRequest req;
    req.prompt = {models[i].info().bos_token_id};
    req.sampling.temperature = 0.0f;
    req.stop.max_tokens = argc > 3 ? std::atoll(argv[3]) : 8;
    req.stop.ignore_eos = true;
    Run* run = &runs[i];
    auto id = engines[i].submit(req, [run](const dsv41::GenerationEvent& ev) {
      if (ev.kind == dsv41::GenerationEvent::Kind::kToken) run->tokens.push_back(ev.token);
      else run->done.set_value(ev.status);
    });
    if (!id) {
      std::fprintf(stderr, "submit: %s\n", id.status().to_string().c_str());
      return 1;
    }
  }
  int rc = 0;
  for (int i = 0; i < 2; ++i) {
    dsv41::Status st = runs[i].done.get_future().get();
    std::printf("model %d (%s):", i, argv[i + 1]);
    for (int32_t t : runs[i].tokens) std::printf(" %d", t);
    std::printf("  [%s]\n", st.to_string().c_str());
    if (!st.is_ok()) rc = 1;
  }
  return rc;
}
