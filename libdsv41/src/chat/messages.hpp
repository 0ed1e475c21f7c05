// The chat conversation as the renderer sees it: OpenAI-style messages plus the two encoder-level
// fields (per-message `tools`, `response_format`) that the reference encoder reads
// (api-and-clients.md §3.2, tests/fixtures/golden/chat/README.md "Request → encoder mapping").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsv41::chat {

enum class Role { kSystem, kDeveloper, kUser, kAssistant, kTool, kLatestReminder };

std::string_view role_name(Role role);

// One element of a list-valued `content`.
struct ContentPart {
  enum class Kind { kText, kImage, kOther };
  Kind kind = Kind::kText;
  std::string text;       // kText
  std::string image_url;  // kImage: data: URL or remote URL (the server decides what it accepts)
  std::string type;       // the part's "type" as given (reported for kOther)
};

// An assistant's earlier tool call. `arguments_json` is JSON text of an object: the request's
// `function.arguments` string as given, or the serialized object when it was given as one.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;
};

// One tool of the request. `function_json` is json.dumps(tool["function"], ensure_ascii=False),
// i.e. exactly the line the renderer writes under "### Available Tool Schemas".
struct ToolSpec {
  std::string name;
  std::string function_json;
};

struct ChatMessage {
  Role role = Role::kUser;
  // `content`: a string (text), a list (parts), or null/absent (neither).
  std::optional<std::string> text;
  std::optional<std::vector<ContentPart>> parts;
  std::optional<std::string> reasoning_content;  // also filled from the `reasoning` alias
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;
  std::string name;
  // Encoder-level fields: tools / response-format schema rendered inside this message.
  std::vector<ToolSpec> tools;
  std::optional<std::string> response_format_json;  // python-dumps text of the JSON schema
  // Internal classification task of the release encoder (action, query, authority, domain,
  // title, read_url): replaces the generation header with the task's special token.
  std::optional<std::string> task;
};

}  // namespace dsv41::chat
