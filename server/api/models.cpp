// GET /v1/models (vLLM ModelCard shape, api-and-clients.md §2.1) and GET /version.
#include "api/api.hpp"
#include "api/generation_run.hpp"
#include "core/json_writer.hpp"

namespace dsv41::server {

HttpResponse handle_models(Api& api, const HttpRequest&) {
  // Process start stands in for the model's creation time.
  static const int64_t kCreated = unix_now();
  const std::string& name = api.config().served_model_name;
  std::shared_ptr<GenerationBackend> backend = api.backend();
  const int64_t max_len = backend ? backend->max_context() : api.config().engine.max_context;
  json::Writer w;
  w.begin_object().key("object").value("list").key("data").begin_array().begin_object();
  w.key("id").value(name).key("object").value("model").key("created").value(kCreated);
  w.key("owned_by").value("dsv41").key("root").value(name).key("parent").null();
  w.key("max_model_len").value(max_len);
  w.key("permission").begin_array().end_array();
  w.end_object().end_array().end_object();
  HttpResponse r;
  r.body = w.take();
  return r;
}

HttpResponse handle_version(Api&, const HttpRequest&) {
  json::Writer w;
  w.begin_object().key("version").value(DSV41_SERVER_VERSION).end_object();
  HttpResponse r;
  r.body = w.take();
  return r;
}

}  // namespace dsv41::server
