// response_format_constraint and json_output_constraint (see response_format.hpp).
#include "api/response_format.hpp"

#include <string>

#include "api/token_vocabulary.hpp"
#include "chat/markers.hpp"
#include "core/check.hpp"
#include "core/log.hpp"
#include "core/tunables.hpp"
#include "sampling/json_constraint.hpp"

namespace dsv41::server {

std::shared_ptr<TokenConstraint> json_output_constraint(GenerationBackend& backend,
                                                        const chat::RequestOptions& options,
                                                        int32_t think_end) {
  if (options.response_format == chat::ResponseFormat::kText) return nullptr;
  // Markers the chat output parser acts on never enter the object.
  std::vector<std::string> reserved = {"<｜", std::string(chat::markers::kDsml),
                                       std::string(chat::markers::kThinkStart),
                                       std::string(chat::markers::kThinkEnd)};
  // json_schema: the schema is enforced when it stays inside the subset of
  // sampling/json_schema.hpp; otherwise only the JSON syntax is, and the log says why (refusing
  // such requests would break clients whose schemas carry e.g. "format" or "minimum").
  std::shared_ptr<const sampling::JsonSchema> schema;
  if (options.response_format == chat::ResponseFormat::kJsonSchema &&
      options.response_format_schema_json) {
    Result<std::shared_ptr<const sampling::JsonSchema>> compiled =
        sampling::compile_json_schema(*options.response_format_schema_json);
    if (compiled.is_ok()) {
      schema = *compiled;
    } else {
      Logger(parse_log_level(Tunables::from_environment().get_string("DSV41_LOG_LEVEL")))
          .log(LogLevel::kWarn, "{}; only the JSON syntax is enforced",
               compiled.status().message());
    }
  }
  return std::make_shared<sampling::JsonConstraint>(token_vocabulary(backend), think_end,
                                                    std::move(reserved), std::move(schema));
}

std::shared_ptr<TokenConstraint> response_format_constraint(GenerationBackend& backend,
                                                            const chat::ChatRequest& request,
                                                            const chat::ResolvedOptions& resolved) {
  if (request.options.response_format == chat::ResponseFormat::kText || !request.tools.empty())
    return nullptr;
  int32_t think_end = -1;
  if (resolved.thinking) {
    Result<std::vector<int32_t>> ids = backend.tokenize(chat::markers::kThinkEnd, true);
    DSV41_CHECK(ids && ids->size() == 1, kInternal,
                "response_format: the think-end marker is not one token in this vocabulary");
    think_end = (*ids)[0];
  }
  return json_output_constraint(backend, request.options, think_end);
}

}  // namespace dsv41::server
