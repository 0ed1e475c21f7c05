// Api: the transport-agnostic server. One function from HttpRequest to HttpResponse (routing, auth,
// handlers), the shared state the handlers read (config, key, backend, metrics), and the shutdown
// switch. Beast never appears here (style-models.md §3 principle 13).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "api/generation_backend.hpp"
#include "api/image_cache.hpp"
#include "api/image_worker.hpp"
#include "api/metrics.hpp"
#include "auth/api_key.hpp"
#include "config.hpp"
#include "http/http_types.hpp"

namespace dsv41::server {

class Api {
 public:
  // `key` absent: no authentication (tests and embedders only; dsv41-server always has one).
  Api(ServerConfig config, std::optional<ApiKey> key);

  // Until a backend is set, /health answers 503 and generation routes 503 "model is loading".
  void set_backend(std::shared_ptr<GenerationBackend> backend);
  std::shared_ptr<GenerationBackend> backend() const;
  // Drops the backend for good with the reason every 503 then names (e.g. the lost TP peer).
  void set_unavailable(std::string reason);
  // Why there is no backend: "the model is still loading" until set_unavailable().
  std::string unavailable_reason() const;
  // New generation requests get 503; every in-flight request is cancelled (streams end with an
  // error event). Idempotent.
  void begin_shutdown();
  bool shutting_down() const { return shutting_down_.load(); }

  HttpResponse handle(const HttpRequest& request);

  const ServerConfig& config() const { return config_; }
  ServerMetrics& metrics() { return metrics_; }
  // Where chat requests with images run their vision tower (stopped by begin_shutdown()).
  ImageWorker& image_worker() { return images_; }
  // Encoded images kept for reuse (ServerConfig::image_cache_bytes).
  ImageCache& image_cache() { return image_cache_; }

 private:
  ServerConfig config_;
  std::optional<ApiKey> key_;
  ServerMetrics metrics_;
  mutable std::mutex mu_;
  std::shared_ptr<GenerationBackend> backend_;
  std::string unavailable_ = "the model is still loading";
  std::atomic<bool> shutting_down_{false};
  ImageCache image_cache_;
  ImageWorker images_;  // last: joined first, while the members its tasks use still exist
};

// Route handlers (one file each under api/).
HttpResponse handle_chat_completions(Api& api, const HttpRequest& request);
HttpResponse handle_completions(Api& api, const HttpRequest& request);
HttpResponse handle_models(Api& api, const HttpRequest& request);
HttpResponse handle_health(Api& api, const HttpRequest& request);
HttpResponse handle_metrics(Api& api, const HttpRequest& request);
HttpResponse handle_version(Api& api, const HttpRequest& request);
HttpResponse handle_tokenize(Api& api, const HttpRequest& request);
HttpResponse handle_detokenize(Api& api, const HttpRequest& request);

}  // namespace dsv41::server
