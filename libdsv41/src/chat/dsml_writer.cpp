// DSML writing (see dsml_writer.hpp). The tools-section text is the release prompt, verified
// byte for byte by golden/chat/render_cases.jsonl (tools_* cases).
#include "chat/dsml_writer.hpp"

#include <fmt/format.h>

#include <utility>

#include "chat/markers.hpp"
#include "core/check.hpp"
#include "core/json_writer.hpp"

namespace dsv41::chat {

namespace {

constexpr std::string_view kToolsHead =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
    "invoke tools by writing a \"<｜DSML｜ calls>\" block like the following:\n\n"
    "<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜ parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜ parameter>\n"
    "...\n"
    "</｜DSML｜ invoke>\n"
    "<｜DSML｜ invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";

constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";

void append_invoke(std::string& out, const ToolCall& call, const std::string& path) {
  simdjson::dom::parser parser, inner;
  simdjson::dom::element args;
  const auto error = parser.parse(call.arguments_json).get(args);
  DSV41_CHECK(!error, kInvalidArgument, "{}.function.arguments: invalid JSON ({})", path,
              simdjson::error_message(error));
  // A JSON string holding the object (double-encoded, as some clients send it) is decoded once
  // more (api-and-clients.md §3.2: "argument strings that are JSON (even double-encoded)").
  if (args.type() == simdjson::dom::element_type::STRING) {
    const simdjson::padded_string text{std::string_view(args)};
    simdjson::dom::element decoded;
    if (!inner.parse(text).get(decoded)) args = decoded;  // the tape lives in `inner`
  }
  DSV41_CHECK(args.type() == simdjson::dom::element_type::OBJECT, kInvalidArgument,
              "{}.function.arguments: must be a JSON object", path);
  // json.loads gives a dict: a repeated key keeps its first position and its last value.
  std::vector<std::pair<std::string_view, simdjson::dom::element>> fields;
  for (auto field : simdjson::dom::object(args)) {
    auto it = std::find_if(fields.begin(), fields.end(),
                           [&](const auto& f) { return f.first == field.key; });
    if (it != fields.end()) {
      it->second = field.value;
    } else {
      fields.emplace_back(field.key, field.value);
    }
  }
  out += markers::kInvokeOpenPrefix;
  out += call.name;
  out += "\">\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += '\n';
    const bool is_string = fields[i].second.type() == simdjson::dom::element_type::STRING;
    out += markers::kParamOpenPrefix;
    out += fields[i].first;
    out += is_string ? "\" string=\"true\">" : "\" string=\"false\">";
    if (is_string) {
      out += std::string_view(fields[i].second);
    } else {
      json::append_python_dumps(out, fields[i].second);
    }
    out += markers::kParamClose;
  }
  out += '\n';
  out += markers::kInvokeClose;
}

}  // namespace

std::string render_tools_section(const std::vector<ToolSpec>& tools) {
  std::string out(kToolsHead);
  for (size_t i = 0; i < tools.size(); ++i) {
    if (i) out += '\n';
    out += tools[i].function_json;
  }
  out += kToolsTail;
  return out;
}

void append_tool_calls_block(std::string& out, const std::vector<ToolCall>& calls,
                             std::string_view path) {
  out += "\n\n";
  out += markers::kCallsOpen;
  out += '\n';
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i) out += '\n';
    append_invoke(out, calls[i], fmt::format("{}.tool_calls[{}]", path, i));
  }
  out += '\n';
  out += markers::kCallsClose;
}

}  // namespace dsv41::chat
