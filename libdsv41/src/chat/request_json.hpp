// OpenAI /v1/chat/completions request JSON → ChatRequest (messages, tools, options). Shared by the
// CLI (`dsv41 render`) and the HTTP server. Unknown fields are ignored (vLLM accepts them, §2.3);
// a field of the wrong shape is an error naming it, e.g. "messages[3].content: expected ...".
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>
#include <vector>

#include "chat/messages.hpp"
#include "chat/options.hpp"
#include "dsv41/status.hpp"

namespace dsv41::chat {

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<ToolSpec> tools;
  RequestOptions options;
};

// Reads `messages`, `tools`, the reasoning/tool/response-format fields of the top level, and an
// optional `options` object {thinking, reasoning_effort, drop_thinking, response_format,
// tool_choice} (the CLI / golden-case spelling of the same controls). Throws kInvalidArgument.
ChatRequest parse_chat_request(simdjson::dom::element root);
Result<ChatRequest> parse_chat_request_json(std::string_view json_text);

// A message list (`field` names it in errors). Accepts the roles system, developer, user,
// assistant, tool and latest_reminder; per-message `tools` and `response_format` (a JSON schema)
// are kept for the encoder.
std::vector<ChatMessage> parse_messages(simdjson::dom::element list, std::string_view field);
// `tools` of a request: [{type: "function", function: {name, ...}}].
std::vector<ToolSpec> parse_tools(simdjson::dom::element list, std::string_view field);
// `response_format` ({type: text | json_object | json_schema, json_schema: {schema}}) into
// options.response_format / response_format_schema_json; `path` names it in errors. Also used by
// /v1/completions. Throws kInvalidArgument.
void parse_response_format(simdjson::dom::element value, RequestOptions& options,
                           const std::string& path);
// null → kAbsent; string → kName; integer → kInteger; anything else → kOther.
EffortValue parse_effort_value(simdjson::dom::element value);

}  // namespace dsv41::chat
