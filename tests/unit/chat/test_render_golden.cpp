// Prompt rendering against the reference encoder's goldens (golden/chat/render_*.jsonl): the
// request path, the encoder path, the pre-release effort table, and the rejected inputs.
#include <catch2/catch.hpp>
#include <map>

#include "chat/prompt_renderer.hpp"
#include "chat/request_json.hpp"
#include "core/check.hpp"
#include "golden_cases.hpp"

using namespace dsv41;
using namespace dsv41::chat;
using dsv41::test::str;

namespace {

EncoderOptions encoder_call_options(simdjson::dom::element call, const EffortTable& table) {
  EncoderOptions o;
  o.thinking = str(call["thinking_mode"]) == "thinking";
  o.effort_budget = resolve_effort_budget(parse_effort_value(call["reasoning_effort"]), table);
  simdjson::dom::element drop;
  if (!call["drop_thinking"].get(drop)) o.drop_thinking = bool(drop);
  return o;
}

}  // namespace

TEST_CASE("chat render_cases: the request path renders byte-identically", "[unit][chat]") {
  const auto rows = test::read_chat_golden("render_cases.jsonl");
  REQUIRE(rows.size() == 56);
  for (const auto& row : rows) {
    INFO("case " << row.name);
    const ChatRequest request = parse_chat_request(row.root);
    const ResolvedOptions resolved =
        resolve_options(request.options, !request.tools.empty(), EffortTable::release());
    auto rendered = render_request(request, resolved);
    REQUIRE(rendered.is_ok());
    CHECK(rendered->text == str(row.root["expected_prompt"]));
    // The resolved options are what the reference encoder was called with.
    const simdjson::dom::element call = row.root["encoder_call"];
    CHECK(resolved.thinking == (str(call["thinking_mode"]) == "thinking"));
    if (resolved.thinking) CHECK(resolved.effort_budget == int64_t(call["resolved_effort_budget"]));
  }
}

TEST_CASE("chat render_cases: the request → encoder mapping equals encoder_messages",
          "[unit][chat]") {
  for (const auto& row : test::read_chat_golden("render_cases.jsonl")) {
    INFO("case " << row.name);
    const auto mapped = to_encoder_messages(parse_chat_request(row.root));
    const auto expected = parse_messages(row.root["encoder_messages"], "encoder_messages");
    REQUIRE(mapped.size() == expected.size());
    for (size_t i = 0; i < mapped.size(); ++i) {
      CHECK(mapped[i].role == expected[i].role);
      CHECK(mapped[i].text == expected[i].text);
      CHECK(mapped[i].response_format_json == expected[i].response_format_json);
      REQUIRE(mapped[i].tools.size() == expected[i].tools.size());
      for (size_t t = 0; t < mapped[i].tools.size(); ++t)
        CHECK(mapped[i].tools[t].function_json == expected[i].tools[t].function_json);
    }
  }
}

TEST_CASE("chat render_cases: the encoder path renders byte-identically", "[unit][chat]") {
  for (const auto& row : test::read_chat_golden("render_cases.jsonl")) {
    INFO("case " << row.name);
    const auto messages = parse_messages(row.root["encoder_messages"], "encoder_messages");
    const auto options = encoder_call_options(row.root["encoder_call"], EffortTable::release());
    CHECK(render_messages(messages, options).text == str(row.root["expected_prompt"]));
  }
}

TEST_CASE("chat render_cases: image parts are reported in placeholder order", "[unit][chat]") {
  for (const auto& row : test::read_chat_golden("render_cases.jsonl")) {
    if (row.name != "image_parts_multiple_and_string_url") continue;
    const auto messages = parse_messages(row.root["encoder_messages"], "encoder_messages");
    const auto out = render_messages(messages, {false, 75, true});
    REQUIRE(out.images.size() == 2);
    CHECK(out.images[0].url.rfind("data:image/png;base64,", 0) == 0);
    CHECK(out.images[1].url == "https://example.com/b.jpg");
  }
}

TEST_CASE("chat render: errors name the request's message index when a system turn is inserted",
          "[unit][chat]") {
  // Tools without a system message: the encoder gets an empty system message first, which must
  // not shift the index the error names (messages[0] was reported as messages[1]).
  auto request = parse_chat_request_json(R"({"messages": [
      {"role": "user", "content": "see <｜deepseek_image｜>"}],
      "tools": [{"type": "function", "function": {"name": "f"}}]})");
  REQUIRE(request.is_ok());
  const auto out =
      render_request(*request, resolve_options(request->options, true, EffortTable::release()));
  REQUIRE_FALSE(out.is_ok());
  CHECK_THAT(out.status().message(), Catch::StartsWith("messages[0].content: contains the image"));
  // A literal placeholder in tool-call arguments is refused by field too.
  auto call = parse_chat_request_json(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
       "function": {"name": "f", "arguments": "{\"a\": \"<｜deepseek_image｜>\"}"}}]},
      {"role": "tool", "tool_call_id": "c", "content": "ok"}]})");
  REQUIRE(call.is_ok());
  const auto out2 =
      render_request(*call, resolve_options(call->options, false, EffortTable::release()));
  REQUIRE_FALSE(out2.is_ok());
  CHECK_THAT(out2.status().message(),
             Catch::Contains("messages[1].tool_calls[0].function.arguments: contains the image"));
}

TEST_CASE("chat render_fixtures_prerelease: reference-drop goldens with the pre-release table",
          "[unit][chat]") {
  const auto rows = test::read_chat_golden("render_fixtures_prerelease.jsonl");
  REQUIRE(rows.size() == 5);
  for (const auto& row : rows) {
    INFO("case " << row.name);
    const simdjson::dom::element options_el = row.root["options"];
    REQUIRE(str(options_el["effort_table"]) == "prerelease");
    const auto messages = parse_messages(row.root["encoder_messages"], "encoder_messages");
    const auto options = encoder_call_options(options_el, EffortTable::prerelease());
    CHECK(render_messages(messages, options).text == str(row.root["expected_prompt"]));
  }
}

TEST_CASE("chat render_error_cases: every reference rejection is an error naming the problem",
          "[unit][chat]") {
  // What our message must say for each case (the reference's wording differs; the meaning and
  // the offending field must be there).
  const std::map<std::string, std::vector<std::string>> expected = {
      {"image_placeholder_literal_in_text", {"messages[0].content", "image placeholder"}},
      {"invalid_effort_medium", {"invalid reasoning effort \"medium\""}},
      {"invalid_effort_minimal", {"invalid reasoning effort \"minimal\""}},
      {"invalid_effort_0", {"invalid reasoning effort 0"}},
      {"invalid_effort_101", {"invalid reasoning effort 101"}},
      {"invalid_effort_True", {"invalid reasoning effort true"}},
      {"invalid_effort_1.5", {"invalid reasoning effort 1.5"}},
      {"invalid_effort_none", {"invalid reasoning effort \"none\""}},
      {"invalid_effort_validated_even_in_chat", {"invalid reasoning effort \"medium\""}},
      {"tool_arguments_not_an_object",
       {"messages[1].tool_calls[0].function.arguments", "must be a JSON object"}},
      {"tool_arguments_invalid_json",
       {"messages[1].tool_calls[0].function.arguments", "invalid JSON"}},
      {"developer_empty_content", {"messages[0].content", "developer", "non-empty"}},
      {"unknown_role", {"encoder_messages[0].role", "unknown role 'function'"}},
  };
  const auto rows = test::read_chat_golden("render_error_cases.jsonl");
  REQUIRE(rows.size() == expected.size());
  for (const auto& row : rows) {
    INFO("case " << row.name);
    REQUIRE(expected.count(row.name) == 1);
    const Status st = detail::capture_status([&] {
      const auto messages = parse_messages(row.root["encoder_messages"], "encoder_messages");
      const auto options = encoder_call_options(row.root["encoder_call"], EffortTable::release());
      (void)render_messages(messages, options);
    });
    REQUIRE_FALSE(st.is_ok());
    CHECK(st.code() == ErrorCode::kInvalidArgument);
    for (const auto& needle : expected.at(row.name))
      CHECK_THAT(st.message(), Catch::Contains(needle));
  }
}
