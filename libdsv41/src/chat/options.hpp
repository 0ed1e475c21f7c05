// Per-request chat options: what the request said (RequestOptions), and the one decision derived
// from it that the prompt renderer and the output parser share (ResolvedOptions, §2.8: vLLM had
// a bug where two endpoints disagreed on thinking on/off; resolving once prevents it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dsv41::chat {

// A reasoning-effort value as it appeared in JSON. kOther keeps values of a wrong type (true,
// 1.5, an object) so that they are reported, not silently ignored.
struct EffortValue {
  enum class Kind { kAbsent, kName, kInteger, kOther };
  Kind kind = Kind::kAbsent;
  std::string name;     // kName
  int64_t integer = 0;  // kInteger
  std::string json;     // the JSON text of the value, for error messages

  static EffortValue of_name(std::string name);
  static EffortValue of_integer(int64_t value);
};

// Named effort levels of the encoder → numeric budget. 0 = the name is rejected.
struct EffortTable {
  int low = 50;
  int high = 75;
  int xhigh = 75;
  int max = 100;

  // HF encoding/ rev df42c109 onward (low 50, high 75, max 100) plus xhigh → 75 as the alias
  // used by deepseek-recipe and sglang PR #39929 (golden/chat/README.md, effort table).
  static EffortTable release() { return {}; }
  // HF rev fb2764a5 = sglang@0e43c224 (low 25, high 50, xhigh 75, max 100).
  static EffortTable prerelease() { return {25, 50, 75, 100}; }
};

// Encoder-level validation (reference render_reasoning_effort): an integer in [1, 100] or a name
// of the table; absent means "high". Anything else throws kInvalidArgument naming the value. The
// value is validated even when the prompt will not show it (chat mode).
int resolve_effort_budget(const EffortValue& effort, const EffortTable& table);

enum class ToolChoiceKind { kNone, kAuto, kRequired, kNamed };
// response_format.type (text: no constraint; json_object / json_schema: the answer is a JSON
// object, sampling::JsonConstraint).
enum class ResponseFormat { kText, kJsonObject, kJsonSchema };

// Request fields that steer rendering and parsing, collected from the OpenAI top level
// (`reasoning_effort`, `thinking: {type}`, `chat_template_kwargs`, `response_format`,
// `tool_choice`, `include_reasoning`) and from the CLI/golden `options` object.
struct RequestOptions {
  std::optional<bool> thinking;         // options.thinking / thinking.type
  std::optional<bool> kwargs_thinking;  // chat_template_kwargs.thinking / enable_thinking
  EffortValue effort;                   // top-level (or options.) reasoning_effort
  EffortValue kwargs_effort;            // chat_template_kwargs.reasoning_effort
  std::optional<bool> drop_thinking;    // options. / chat_template_kwargs.drop_thinking
  std::optional<std::string> response_format_schema_json;  // json_schema.schema, python-dumps
  ResponseFormat response_format = ResponseFormat::kText;
  std::optional<ToolChoiceKind> tool_choice;
  std::string tool_choice_name;  // kNamed
  bool include_reasoning = true;
};

struct ResolvedOptions {
  bool thinking = true;
  int effort_budget = 0;  // 1..100 when thinking, 0 in chat mode
  bool drop_thinking = true;
  ToolChoiceKind tool_choice = ToolChoiceKind::kNone;
  std::string tool_choice_name;
  bool include_reasoning = true;
};

// §2.8 server rule: "none" → chat mode; "minimal" → "low"; "medium" → "high"; low/high/xhigh/
// max and integers pass to resolve_effort_budget. Thinking is on unless some source turns it
// off. tool_choice defaults to auto with tools, none without; a named choice must name a tool
// (checked by the caller that knows the tools). Throws kInvalidArgument naming the field.
ResolvedOptions resolve_options(const RequestOptions& request, bool has_tools,
                                const EffortTable& table);

}  // namespace dsv41::chat
