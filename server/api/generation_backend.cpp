#include "api/generation_backend.hpp"

#include <algorithm>

namespace dsv41::server {

Result<std::unique_ptr<EngineBackend>> EngineBackend::create(Model model,
                                                             const EngineParams& params) {
  Result<Engine> engine = Engine::create(model, params);
  if (!engine) return engine.status();
  // Engine::create clamps max_context to the model's position limit; mirror it for validation.
  const int64_t ctx = std::min(params.max_context, model.info().max_position_embeddings);
  return std::unique_ptr<EngineBackend>(
      new EngineBackend(std::move(model), std::move(*engine), ctx));
}

EngineBackend::EngineBackend(Model model, Engine engine, int64_t max_context)
    : model_(std::move(model)), engine_(std::move(engine)), max_context_(max_context) {}

Result<std::vector<int32_t>> EngineBackend::tokenize(std::string_view text, bool special) const {
  return model_.tokenize(text, special);
}

Result<std::string> EngineBackend::detokenize(std::span<const int32_t> ids) const {
  return model_.detokenize(ids);
}

Result<RequestId> EngineBackend::submit(GenerationRequest request, EventCallback on_event) {
  return engine_.submit(std::move(request), std::move(on_event));
}

Status EngineBackend::cancel(RequestId id) { return engine_.cancel(id); }
EngineStats EngineBackend::stats() const { return engine_.stats(); }
int64_t EngineBackend::vocab_size() const { return model_.info().vocab_size; }
void EngineBackend::shutdown() { engine_.shutdown(); }

}  // namespace dsv41::server
