// Routing and authentication: one auth check before routing (style-models.md §3 principle 13).
// Paths are accepted with and without the /v1 prefix (llama.cpp does the same, §2.1).
#include "api/api.hpp"

#include <simdjson.h>

#include "api/api_errors.hpp"
#include "core/check.hpp"

namespace dsv41::server {

namespace {

using Handler = HttpResponse (*)(Api&, const HttpRequest&);

struct Route {
  const char* path;  // without the /v1 prefix
  const char* method;
  Handler handler;
  bool open;  // reachable without the key
};

constexpr Route kRoutes[] = {
    {"/chat/completions", "POST", &handle_chat_completions, false},
    {"/completions", "POST", &handle_completions, false},
    {"/models", "GET", &handle_models, false},
    {"/health", "GET", &handle_health, true},
    {"/metrics", "GET", &handle_metrics, false},
    {"/version", "GET", &handle_version, false},
    {"/tokenize", "POST", &handle_tokenize, false},
    {"/detokenize", "POST", &handle_detokenize, false},
};

}  // namespace

Api::Api(ServerConfig config, std::optional<ApiKey> key)
    : config_(std::move(config)), key_(std::move(key)), image_cache_(config_.image_cache_bytes) {}

void Api::set_backend(std::shared_ptr<GenerationBackend> backend) {
  std::lock_guard<std::mutex> lock(mu_);
  backend_ = std::move(backend);
}

std::shared_ptr<GenerationBackend> Api::backend() const {
  std::lock_guard<std::mutex> lock(mu_);
  return backend_;
}

void Api::set_unavailable(std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  backend_.reset();
  unavailable_ = std::move(reason);
}

std::string Api::unavailable_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unavailable_;
}

void Api::begin_shutdown() {
  if (shutting_down_.exchange(true)) return;
  images_.stop();
  if (auto b = backend()) b->shutdown();
}

HttpResponse Api::handle(const HttpRequest& request) {
  std::string path = request.path;
  if (path.rfind("/v1/", 0) == 0) path = path.substr(3);
  const Route* match = nullptr;
  bool path_known = false;
  std::string allow;  // the path's methods, for a 405's Allow header (RFC 9110 §15.5.6)
  // HEAD is GET without the body (the connection drops it): same route, same key rule.
  const std::string method = request.method == "HEAD" ? "GET" : request.method;
  for (const Route& r : kRoutes) {
    if (path != r.path) continue;
    path_known = true;
    if (method == r.method) match = &r;
    allow += (allow.empty() ? "" : ", ") + std::string(r.method) +
             (std::string_view(r.method) == "GET" ? ", HEAD" : "");
  }
  if (!path_known)
    return error_response(404, "no route for " + request.method + " " + request.path);
  const bool open = match ? match->open : false;
  const bool metrics_open = path == "/metrics" && !config_.metrics_require_key;
  if (key_ && !open && !metrics_open && !key_->check(request.header("authorization")))
    return error_response(401, "missing or invalid API key (Authorization: Bearer <key>)");
  if (!match) {
    HttpResponse r =
        error_response(405, "method " + request.method + " is not allowed on " + request.path);
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  try {
    return match->handler(*this, request);
  } catch (const detail::Failure& f) {
    return error_response(f.to_status());
  } catch (const simdjson::simdjson_error& e) {
    return error_response(400, std::string("body: ") + e.what(), "body");
  } catch (const std::bad_alloc&) {
    return error_response(503, "out of host memory");
  } catch (const std::exception& e) {
    return error_response(500, std::string("internal error: ") + e.what());
  }
}

}  // namespace dsv41::server
