// GET /health (200 {"status":"ok"} once the model is loaded, 503 while loading, after a lost TP
// peer or shutting down; llama.cpp's shape, §2.1) and GET /metrics (Prometheus text, §2.11).
#include "api/api.hpp"
#include "api/api_errors.hpp"

namespace dsv41::server {

HttpResponse handle_health(Api& api, const HttpRequest&) {
  if (!api.backend()) return error_response(503, api.unavailable_reason());
  if (api.shutting_down()) return error_response(503, "the server is shutting down");
  HttpResponse r;
  r.body = R"({"status":"ok"})";
  return r;
}

HttpResponse handle_metrics(Api& api, const HttpRequest&) {
  std::shared_ptr<GenerationBackend> backend = api.backend();
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = api.metrics().render(backend ? backend->stats() : EngineStats{},
                                api.config().served_model_name);
  return r;
}

}  // namespace dsv41::server
