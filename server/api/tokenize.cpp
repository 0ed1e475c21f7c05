// POST /tokenize {"prompt": str, "add_special_tokens"?: bool} → {"tokens", "count",
// "max_model_len"}; POST /detokenize {"tokens": [ids]} → {"prompt"} (vLLM extras, §2.1).
// add_special_tokens (default true) decides whether special-token strings become their ids.
#include "api/api.hpp"
#include "api/api_errors.hpp"
#include "api/generation_run.hpp"
#include "core/check.hpp"
#include "core/json_writer.hpp"

namespace dsv41::server {

using simdjson::dom::element;
using simdjson::dom::element_type;

HttpResponse handle_tokenize(Api& api, const HttpRequest& request) {
  std::shared_ptr<GenerationBackend> backend = api.backend();
  if (!backend) return error_response(503, api.unavailable_reason());
  simdjson::dom::parser parser;
  element root = parse_body(parser, request.body);
  element prompt;
  DSV41_CHECK(!root.at_key("prompt").get(prompt) && prompt.type() == element_type::STRING,
              kInvalidArgument, "prompt: expected a string");
  bool special = true;
  element flag;
  if (!root.at_key("add_special_tokens").get(flag) && !flag.is_null()) {
    DSV41_CHECK(flag.type() == element_type::BOOL, kInvalidArgument,
                "add_special_tokens: expected a boolean");
    special = bool(flag);
  }
  Result<std::vector<int32_t>> ids = backend->tokenize(std::string_view(prompt), special);
  if (!ids) return error_response(ids.status(), "prompt");
  json::Writer w;
  w.begin_object().key("tokens").begin_array();
  for (int32_t id : *ids) w.value(int64_t(id));
  w.end_array().key("count").value(int64_t(ids->size()));
  w.key("max_model_len").value(backend->max_context()).end_object();
  HttpResponse r;
  r.body = w.take();
  return r;
}

HttpResponse handle_detokenize(Api& api, const HttpRequest& request) {
  std::shared_ptr<GenerationBackend> backend = api.backend();
  if (!backend) return error_response(503, api.unavailable_reason());
  simdjson::dom::parser parser;
  element root = parse_body(parser, request.body);
  element tokens;
  DSV41_CHECK(!root.at_key("tokens").get(tokens) && tokens.type() == element_type::ARRAY,
              kInvalidArgument, "tokens: expected a list of token ids");
  std::vector<int32_t> ids;
  size_t i = 0;
  for (element t : simdjson::dom::array(tokens)) {
    DSV41_CHECK(
        t.type() == element_type::INT64 && int64_t(t) >= 0 && int64_t(t) < backend->vocab_size(),
        kInvalidArgument, "tokens[{}]: expected a token id in [0, {})", i, backend->vocab_size());
    ids.push_back(static_cast<int32_t>(int64_t(t)));
    ++i;
  }
  Result<std::string> text = backend->detokenize(ids);
  if (!text) return error_response(text.status(), "tokens");
  json::Writer w;
  w.begin_object().key("prompt").value(*text).end_object();
  HttpResponse r;
  r.body = w.take();
  return r;
}

}  // namespace dsv41::server
