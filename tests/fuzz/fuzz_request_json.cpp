// libFuzzer target: arbitrary bytes as a /v1/chat/completions or /v1/completions body through the
// server's request parsing (JSON → chat request → resolved options → rendered prompt, and the
// sampling/stop fields). Every input must end in a value or a kInvalidArgument-style Failure;
// anything else (crash, other exception, sanitizer report) is a bug.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/request_fields.hpp"
#include "chat/prompt_renderer.hpp"
#include "chat/request_json.hpp"
#include "core/check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body).get(root)) return 0;
  try {
    (void)dsv41::server::parse_generation_fields(root, dsv41::server::Endpoint::kChat, 600);
  } catch (const dsv41::detail::Failure&) {
  }
  try {
    (void)dsv41::server::parse_generation_fields(root, dsv41::server::Endpoint::kCompletions, 600);
  } catch (const dsv41::detail::Failure&) {
  }
  try {
    dsv41::chat::ChatRequest request = dsv41::chat::parse_chat_request(root);
    dsv41::chat::ResolvedOptions resolved = dsv41::chat::resolve_options(
        request.options, !request.tools.empty(), dsv41::chat::EffortTable::release());
    (void)dsv41::chat::render_request(request, resolved);
  } catch (const dsv41::detail::Failure&) {
  }
  return 0;
}
