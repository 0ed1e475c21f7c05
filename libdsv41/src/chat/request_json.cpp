// Request JSON → ChatRequest (see request_json.hpp). Mapping of the content shapes follows the
// reference encoder's process_image_messages (golden/chat/README.md).
#include "chat/request_json.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "core/check.hpp"
#include "core/json_writer.hpp"

namespace dsv41::chat {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

const char* type_name(element value) {
  switch (value.type()) {
    case element_type::OBJECT:
      return "an object";
    case element_type::ARRAY:
      return "an array";
    case element_type::STRING:
      return "a string";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return "a number";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "?";
}

std::optional<element> find(element object, std::string_view key) {
  element out;
  if (object.type() != element_type::OBJECT || object.at_key(key).get(out)) return std::nullopt;
  return out;
}

// A present, non-null member.
std::optional<element> find_set(element object, std::string_view key) {
  auto v = find(object, key);
  if (v && v->is_null()) return std::nullopt;
  return v;
}

std::string join(std::string_view path, std::string_view key) {
  return fmt::format("{}.{}", path, key);
}

std::string at(std::string_view path, size_t index) { return fmt::format("{}[{}]", path, index); }

void expect(element value, element_type type, const std::string& path, const char* what) {
  DSV41_CHECK(value.type() == type, kInvalidArgument, "{}: expected {}, got {}", path, what,
              type_name(value));
}

std::string get_string(element value, const std::string& path) {
  expect(value, element_type::STRING, path, "a string");
  return std::string(std::string_view(value));
}

bool get_bool(element value, const std::string& path) {
  expect(value, element_type::BOOL, path, "a boolean");
  return bool(value);
}

std::optional<std::string> opt_string(element object, std::string_view key, std::string_view path) {
  auto v = find_set(object, key);
  if (!v) return std::nullopt;
  return get_string(*v, join(path, key));
}

Role parse_role(element message, const std::string& path) {
  auto v = find(message, "role");
  DSV41_CHECK(v.has_value(), kInvalidArgument, "{}.role: missing", path);
  const std::string role = get_string(*v, path + ".role");
  if (role == "system") return Role::kSystem;
  if (role == "developer") return Role::kDeveloper;
  if (role == "user") return Role::kUser;
  if (role == "assistant") return Role::kAssistant;
  if (role == "tool") return Role::kTool;
  if (role == "latest_reminder") return Role::kLatestReminder;
  DSV41_FAIL(kInvalidArgument,
             "{}.role: unknown role '{}' (expected system, developer, user, assistant, tool or "
             "latest_reminder)",
             path, role);
}

ContentPart parse_part(element part, const std::string& path) {
  expect(part, element_type::OBJECT, path, "a content part object");
  ContentPart out;
  auto type = find_set(part, "type");
  DSV41_CHECK(type.has_value(), kInvalidArgument, "{}.type: missing", path);
  out.type = get_string(*type, path + ".type");
  if (out.type == "text") {
    out.kind = ContentPart::Kind::kText;
    out.text = opt_string(part, "text", path).value_or("");
  } else if (out.type == "image_url" || out.type == "image") {
    out.kind = ContentPart::Kind::kImage;
    // image_url: {"url": ...} or a bare string; "image": url / data / source.
    if (auto url = find_set(part, "image_url")) {
      if (url->type() == element_type::STRING) {
        out.image_url = std::string(std::string_view(*url));
      } else {
        expect(*url, element_type::OBJECT, path + ".image_url", "an object or a string");
        out.image_url = opt_string(*url, "url", path + ".image_url").value_or("");
      }
    } else {
      for (const char* key : {"url", "data", "source"}) {
        if (auto v = find_set(part, key); v && v->type() == element_type::STRING) {
          out.image_url = std::string(std::string_view(*v));
          break;
        }
      }
    }
    DSV41_CHECK(!out.image_url.empty(), kInvalidArgument,
                "{}: image part has no url (expected image_url.url)", path);
  } else {
    out.kind = ContentPart::Kind::kOther;
  }
  return out;
}

std::string arguments_json(element function, const std::string& path) {
  auto args = find(function, "arguments");
  if (!args || args->is_null()) return "{}";
  if (args->type() == element_type::STRING) return std::string(std::string_view(*args));
  return simdjson::minify(*args);
}

ToolCall parse_tool_call(element call, const std::string& path) {
  expect(call, element_type::OBJECT, path, "a tool call object");
  ToolCall out;
  out.id = opt_string(call, "id", path).value_or("");
  auto function = find_set(call, "function");
  DSV41_CHECK(function.has_value(), kInvalidArgument, "{}.function: missing", path);
  const std::string fpath = path + ".function";
  expect(*function, element_type::OBJECT, fpath, "an object");
  auto name = opt_string(*function, "name", fpath);
  DSV41_CHECK(name.has_value(), kInvalidArgument, "{}.name: missing", fpath);
  out.name = *name;
  out.arguments_json = arguments_json(*function, fpath);
  if (out.id.empty()) out.id = opt_string(*function, "id", fpath).value_or("");
  return out;
}

ChatMessage parse_message(element message, const std::string& path) {
  expect(message, element_type::OBJECT, path, "a message object");
  ChatMessage out;
  out.role = parse_role(message, path);
  if (auto content = find_set(message, "content")) {
    if (content->type() == element_type::STRING) {
      out.text = std::string(std::string_view(*content));
    } else {
      expect(*content, element_type::ARRAY, path + ".content",
             "a string, an array of parts or null");
      out.parts.emplace();
      size_t i = 0;
      for (element part : simdjson::dom::array(*content))
        out.parts->push_back(parse_part(part, at(path + ".content", i++)));
    }
  }
  // The first non-empty of the two names: Pi replays thinking under the field the server streamed
  // (`reasoning` with DSV41_REASONING_FIELD) and may add `reasoning_content: ""` beside it
  // (requiresReasoningContentOnAssistantMessages), which hid the text.
  const std::optional<std::string> rc = opt_string(message, "reasoning_content", path),
                                   r = opt_string(message, "reasoning", path);
  out.reasoning_content = rc && !rc->empty() ? rc : r && !r->empty() ? r : rc ? rc : r;
  if (auto calls = find_set(message, "tool_calls")) {
    expect(*calls, element_type::ARRAY, path + ".tool_calls", "an array");
    size_t i = 0;
    for (element call : simdjson::dom::array(*calls))
      out.tool_calls.push_back(parse_tool_call(call, at(path + ".tool_calls", i++)));
  }
  out.tool_call_id = opt_string(message, "tool_call_id", path).value_or("");
  out.name = opt_string(message, "name", path).value_or("");
  if (auto tools = find_set(message, "tools")) out.tools = parse_tools(*tools, path + ".tools");
  if (auto rf = find_set(message, "response_format"))
    out.response_format_json = json::python_dumps(*rf);
  out.task = opt_string(message, "task", path);
  return out;
}

void parse_tool_choice(element value, RequestOptions& options, const std::string& path) {
  if (value.type() == element_type::STRING) {
    const std::string_view s(value);
    if (s == "none") {
      options.tool_choice = ToolChoiceKind::kNone;
    } else if (s == "auto") {
      options.tool_choice = ToolChoiceKind::kAuto;
    } else if (s == "required") {
      options.tool_choice = ToolChoiceKind::kRequired;
    } else {
      DSV41_FAIL(kInvalidArgument, "{}: unknown value '{}' (expected none, auto or required)", path,
                 s);
    }
    return;
  }
  expect(value, element_type::OBJECT, path, "a string or {\"type\": \"function\", ...}");
  auto function = find_set(value, "function");
  DSV41_CHECK(function.has_value(), kInvalidArgument, "{}.function: missing", path);
  auto name = opt_string(*function, "name", path + ".function");
  DSV41_CHECK(name.has_value(), kInvalidArgument, "{}.function.name: missing", path);
  options.tool_choice = ToolChoiceKind::kNamed;
  options.tool_choice_name = *name;
}

// `thinking` as DeepSeek's {"type": "enabled"|"disabled"} or a plain boolean.
bool parse_thinking(element value, const std::string& path) {
  if (value.type() == element_type::BOOL) return bool(value);
  expect(value, element_type::OBJECT, path, "a boolean or {\"type\": \"enabled\"|\"disabled\"}");
  const std::string type = opt_string(value, "type", path).value_or("");
  DSV41_CHECK(type == "enabled" || type == "disabled", kInvalidArgument,
              "{}.type: expected \"enabled\" or \"disabled\", got '{}'", path, type);
  return type == "enabled";
}

void parse_options_object(element object, RequestOptions& options, const std::string& path) {
  if (auto v = find_set(object, "thinking"))
    options.thinking = parse_thinking(*v, path + ".thinking");
  if (auto v = find(object, "reasoning_effort")) options.effort = parse_effort_value(*v);
  if (auto v = find_set(object, "drop_thinking"))
    options.drop_thinking = get_bool(*v, path + ".drop_thinking");
  if (auto v = find_set(object, "response_format"))
    parse_response_format(*v, options, path + ".response_format");
  if (auto v = find_set(object, "tool_choice"))
    parse_tool_choice(*v, options, path + ".tool_choice");
}

}  // namespace

EffortValue parse_effort_value(element value) {
  EffortValue out;
  switch (value.type()) {
    case element_type::NULL_VALUE:
      return out;
    case element_type::STRING:
      return EffortValue::of_name(std::string(std::string_view(value)));
    case element_type::INT64:
      return EffortValue::of_integer(int64_t(value));
    default:
      out.kind = EffortValue::Kind::kOther;
      out.json = json::python_dumps(value);
      return out;
  }
}

std::vector<ToolSpec> parse_tools(element list, std::string_view field) {
  const std::string path(field);
  expect(list, element_type::ARRAY, path, "an array of tools");
  std::vector<ToolSpec> out;
  size_t i = 0;
  for (element tool : simdjson::dom::array(list)) {
    const std::string tpath = at(path, i++);
    expect(tool, element_type::OBJECT, tpath, "a tool object");
    auto function = find_set(tool, "function");
    DSV41_CHECK(function.has_value(), kInvalidArgument, "{}.function: missing", tpath);
    expect(*function, element_type::OBJECT, tpath + ".function", "an object");
    auto name = opt_string(*function, "name", tpath + ".function");
    DSV41_CHECK(name.has_value(), kInvalidArgument, "{}.function.name: missing", tpath);
    out.push_back({*name, json::python_dumps(*function)});
  }
  return out;
}

std::vector<ChatMessage> parse_messages(element list, std::string_view field) {
  const std::string path(field);
  expect(list, element_type::ARRAY, path, "an array of messages");
  std::vector<ChatMessage> out;
  size_t i = 0;
  for (element message : simdjson::dom::array(list))
    out.push_back(parse_message(message, at(path, i++)));
  return out;
}

void parse_response_format(element value, RequestOptions& options, const std::string& path) {
  expect(value, element_type::OBJECT, path, "an object");
  const std::string type = opt_string(value, "type", path).value_or("");
  if (type == "json_schema") {
    auto spec = find_set(value, "json_schema");
    DSV41_CHECK(spec.has_value(), kInvalidArgument, "{}.json_schema: missing", path);
    auto schema = find_set(*spec, "schema");
    DSV41_CHECK(schema.has_value(), kInvalidArgument, "{}.json_schema.schema: missing", path);
    options.response_format_schema_json = json::python_dumps(*schema);
    options.response_format = ResponseFormat::kJsonSchema;
  } else {
    // "text" and "json_object" carry no schema; the reference renders nothing for them.
    DSV41_CHECK(type == "text" || type == "json_object", kInvalidArgument,
                "{}.type: unknown value '{}' (expected text, json_object or json_schema)", path,
                type);
    if (type == "json_object") options.response_format = ResponseFormat::kJsonObject;
  }
}

ChatRequest parse_chat_request(element root) {
  expect(root, element_type::OBJECT, "request", "a JSON object");
  ChatRequest out;
  auto messages = find(root, "messages");
  DSV41_CHECK(messages.has_value(), kInvalidArgument, "messages: missing");
  out.messages = parse_messages(*messages, "messages");
  DSV41_CHECK(!out.messages.empty(), kInvalidArgument, "messages: empty");
  if (auto tools = find_set(root, "tools")) out.tools = parse_tools(*tools, "tools");

  RequestOptions& o = out.options;
  if (auto v = find(root, "reasoning_effort")) o.effort = parse_effort_value(*v);
  if (auto v = find_set(root, "thinking")) o.thinking = parse_thinking(*v, "thinking");
  if (auto v = find_set(root, "enable_thinking")) o.thinking = get_bool(*v, "enable_thinking");
  if (auto v = find_set(root, "response_format")) parse_response_format(*v, o, "response_format");
  if (auto v = find_set(root, "tool_choice")) parse_tool_choice(*v, o, "tool_choice");
  if (auto v = find_set(root, "include_reasoning"))
    o.include_reasoning = get_bool(*v, "include_reasoning");
  if (auto kw = find_set(root, "chat_template_kwargs")) {
    expect(*kw, element_type::OBJECT, "chat_template_kwargs", "an object");
    for (const char* key : {"thinking", "enable_thinking"}) {
      if (auto v = find_set(*kw, key))
        o.kwargs_thinking = get_bool(*v, fmt::format("chat_template_kwargs.{}", key));
    }
    if (auto v = find(*kw, "reasoning_effort")) o.kwargs_effort = parse_effort_value(*v);
    if (auto v = find_set(*kw, "drop_thinking"))
      o.drop_thinking = get_bool(*v, "chat_template_kwargs.drop_thinking");
  }
  if (auto opts = find_set(root, "options")) {
    expect(*opts, element_type::OBJECT, "options", "an object");
    parse_options_object(*opts, o, "options");
  }
  return out;
}

Result<ChatRequest> parse_chat_request_json(std::string_view json_text) {
  std::optional<ChatRequest> out;
  Status st = detail::capture_status([&] {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(json_text);
    element root;
    const auto error = parser.parse(padded).get(root);
    DSV41_CHECK(!error, kInvalidArgument, "request: invalid JSON ({})",
                simdjson::error_message(error));
    out = parse_chat_request(root);
  });
  if (!st.is_ok()) return st;
  return std::move(*out);
}

}  // namespace dsv41::chat
