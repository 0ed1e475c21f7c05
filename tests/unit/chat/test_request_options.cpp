// Request JSON parsing (errors name the field) and the one-per-request option resolution
// (api-and-clients.md §2.3, §2.8).
#include <catch2/catch.hpp>

#include "chat/prompt_renderer.hpp"
#include "chat/request_json.hpp"
#include "core/check.hpp"

using namespace dsv41;
using namespace dsv41::chat;

namespace {

ResolvedOptions resolve_json(const std::string& json) {
  auto request = parse_chat_request_json(json);
  REQUIRE(request.is_ok());
  return resolve_options(request->options, !request->tools.empty(), EffortTable::release());
}

std::string resolve_error(const std::string& json) {
  const Status st = detail::capture_status([&] {
    auto request = parse_chat_request_json(json);
    if (!request.is_ok())
      throw detail::Failure(request.status().code(), request.status().message(), __FILE__,
                            __LINE__);
    const auto resolved =
        resolve_options(request->options, !request->tools.empty(), EffortTable::release());
    auto rendered = render_request(*request, resolved);
    if (!rendered.is_ok())
      throw detail::Failure(rendered.status().code(), rendered.status().message(), __FILE__,
                            __LINE__);
  });
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == ErrorCode::kInvalidArgument);
  return st.message();
}

constexpr const char* kUser = R"("messages": [{"role": "user", "content": "q"}])";
constexpr const char* kTool =
    R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}])";

}  // namespace

TEST_CASE("chat options: reasoning effort names, integers, thinking switches", "[unit][chat]") {
  const auto r = [](const std::string& fields) {
    return resolve_json(std::string("{") + kUser + (fields.empty() ? "" : ", ") + fields + "}");
  };
  CHECK(r("").thinking);
  CHECK(r("").effort_budget == 75);
  CHECK(r(R"("reasoning_effort": "low")").effort_budget == 50);
  CHECK(r(R"("reasoning_effort": "minimal")").effort_budget == 50);
  CHECK(r(R"("reasoning_effort": "medium")").effort_budget == 75);
  CHECK(r(R"("reasoning_effort": "high")").effort_budget == 75);
  CHECK(r(R"("reasoning_effort": "xhigh")").effort_budget == 75);
  CHECK(r(R"("reasoning_effort": "max")").effort_budget == 100);
  CHECK(r(R"("reasoning_effort": 33)").effort_budget == 33);
  CHECK_FALSE(r(R"("reasoning_effort": "none")").thinking);
  CHECK_FALSE(r(R"("thinking": {"type": "disabled"})").thinking);
  CHECK(r(R"("thinking": {"type": "enabled"})").thinking);
  CHECK_FALSE(r(R"("chat_template_kwargs": {"enable_thinking": false})").thinking);
  CHECK_FALSE(r(R"("chat_template_kwargs": {"thinking": false})").thinking);
  CHECK_FALSE(r(R"("options": {"thinking": false})").thinking);
  CHECK(r(R"("reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "max"})")
            .effort_budget == 100);
  CHECK_FALSE(r(R"("chat_template_kwargs": {"drop_thinking": false})").drop_thinking);
  CHECK_FALSE(r(R"("include_reasoning": false)").include_reasoning);
  CHECK(r("").tool_choice == ToolChoiceKind::kNone);
  CHECK(r(kTool).tool_choice == ToolChoiceKind::kAuto);
  const auto named =
      r(std::string(kTool) + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})");
  CHECK(named.tool_choice == ToolChoiceKind::kNamed);
  CHECK(named.tool_choice_name == "f");
  CHECK(r(std::string(kTool) + R"(, "tool_choice": "required")").tool_choice ==
        ToolChoiceKind::kRequired);
  // The pre-release table maps the same names differently.
  auto request = parse_chat_request_json(std::string("{") + kUser + "}");
  REQUIRE(request.is_ok());
  CHECK(resolve_options(request->options, false, EffortTable::prerelease()).effort_budget == 50);
}

TEST_CASE("chat options and request: errors name the offending field", "[unit][chat]") {
  const auto err = [](const std::string& json) { return resolve_error(json); };
  CHECK_THAT(err("{"), Catch::Contains("invalid JSON"));
  CHECK_THAT(err("[]"), Catch::Contains("request: expected a JSON object"));
  CHECK_THAT(err("{}"), Catch::Contains("messages: missing"));
  CHECK_THAT(err(R"({"messages": []})"), Catch::Contains("messages: empty"));
  CHECK_THAT(err(R"({"messages": [{"role": "user", "content": 5}]})"),
             Catch::Contains("messages[0].content: expected a string, an array of parts or null"));
  CHECK_THAT(err(R"({"messages": [{"content": "x"}]})"),
             Catch::Contains("messages[0].role: missing"));
  CHECK_THAT(err(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
             Catch::Contains("messages[0].content[0]: image part has no url"));
  CHECK_THAT(err(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]})"),
             Catch::Contains("messages[0].tool_calls[0].function.name: missing"));
  CHECK_THAT(err(std::string("{") + kUser + R"(, "tools": [{"type": "function"}]})"),
             Catch::Contains("tools[0].function: missing"));
  CHECK_THAT(err(std::string("{") + kUser + R"(, "reasoning_effort": "bogus"})"),
             Catch::Contains("invalid reasoning effort \"bogus\""));
  CHECK_THAT(err(std::string("{") + kUser + R"(, "thinking": false, "reasoning_effort": 0})"),
             Catch::Contains("invalid reasoning effort 0"));
  CHECK_THAT(err(std::string("{") + kUser + R"(, "thinking": {"type": "maybe"}})"),
             Catch::Contains("thinking.type"));
  CHECK_THAT(err(std::string("{") + kUser + R"(, "tool_choice": "sometimes"})"),
             Catch::Contains("tool_choice: unknown value 'sometimes'"));
  CHECK_THAT(err(std::string("{") + kUser + R"(, "tool_choice": "required"})"),
             Catch::Contains("request has no tools"));
  CHECK_THAT(err(std::string("{") + kUser + ", " + kTool +
                 R"(, "tool_choice": {"type": "function", "function": {"name": "g"}}})"),
             Catch::Contains("'g' is not one of the request's tools"));
  CHECK_THAT(err(std::string("{") + kUser + R"(, "response_format": {"type": "xml"}})"),
             Catch::Contains("response_format.type: unknown value 'xml'"));
  CHECK_THAT(err(R"({"messages": [{"role": "user", "content": "q", "task": "bogus"}]})"),
             Catch::Contains("messages[0].task: unknown task 'bogus'"));
  CHECK_THAT(
      err(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant",
      "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]})"),
      Catch::Contains("messages[1].tool_calls[0].function.arguments: must be a JSON object"));
}

TEST_CASE("chat request: double-encoded tool-call arguments render as the object", "[unit][chat]") {
  // api-and-clients.md §3.2: argument strings that are JSON, even double-encoded, are decoded.
  const auto render = [](const std::string& arguments) -> Result<std::string> {
    auto request = parse_chat_request_json(R"({"messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": "c", "type": "function",
                         "function": {"name": "f", "arguments": )" +
                                           arguments + R"(}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}]})");
    if (!request.is_ok()) return request.status();
    auto out =
        render_request(*request, resolve_options(request->options, false, EffortTable::release()));
    if (!out.is_ok()) return out.status();
    return out->text;
  };
  const Result<std::string> once = render(R"("{\"a\": 1, \"b\": \"s\"}")");
  const Result<std::string> twice = render(R"("\"{\\\"a\\\": 1, \\\"b\\\": \\\"s\\\"}\"")");
  REQUIRE(once.is_ok());
  REQUIRE(twice.is_ok());
  CHECK(*twice == *once);
  CHECK_THAT(*once, Catch::Contains("<｜DSML｜ parameter name=\"a\" string=\"false\">1"));
  // A string that is not JSON inside stays an error naming the field.
  const Result<std::string> text = render(R"("\"not json\"")");
  REQUIRE_FALSE(text.is_ok());
  CHECK_THAT(
      text.status().message(),
      Catch::Contains("messages[1].tool_calls[0].function.arguments: must be a JSON object"));
}

TEST_CASE("chat request: arguments given as an object, the reasoning alias, unknown fields",
          "[unit][chat]") {
  auto request = parse_chat_request_json(R"({"model": "x", "store": true, "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": null, "reasoning": "think",
       "tool_calls": [{"id": "c", "type": "function",
                       "function": {"name": "f", "arguments": {"b": [1, 2.50], "a": "s"}}}]},
      {"role": "tool", "tool_call_id": "c", "content": "ok"}]})");
  REQUIRE(request.is_ok());
  REQUIRE(request->messages[1].reasoning_content == std::optional<std::string>("think"));
  // Both names: the first non-empty one (Pi may send reasoning_content "" beside reasoning).
  const auto both = [](const std::string& fields) {
    auto r = parse_chat_request_json(R"({"messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", )" +
                                     fields + "}]}");
    REQUIRE(r.is_ok());
    return r->messages[1].reasoning_content;
  };
  CHECK(both(R"("reasoning_content": "", "reasoning": "t")") == std::optional<std::string>("t"));
  CHECK(both(R"("reasoning": "t", "reasoning_content": "")") == std::optional<std::string>("t"));
  CHECK(both(R"("reasoning_content": "u", "reasoning": "t")") == std::optional<std::string>("u"));
  CHECK(both(R"("reasoning_content": "", "reasoning": "")") == std::optional<std::string>(""));
  CHECK(both(R"("reasoning_content": null)") == std::nullopt);
  const auto resolved = resolve_options(request->options, false, EffortTable::release());
  ResolvedOptions keep = resolved;
  keep.drop_thinking = false;
  auto out = render_request(*request, keep);
  REQUIRE(out.is_ok());
  CHECK_THAT(
      out->text,
      Catch::Contains("<｜Assistant｜><think>think</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ "
                      "invoke name=\"f\">\n<｜DSML｜ parameter name=\"b\" "
                      "string=\"false\">[1, 2.5]</｜DSML｜ parameter>\n<｜DSML｜ parameter "
                      "name=\"a\" string=\"true\">s</｜DSML｜ parameter>\n</｜DSML｜ "
                      "invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜><｜User｜><tool_result>ok"
                      "</tool_result><｜Assistant｜><think>"));
}
