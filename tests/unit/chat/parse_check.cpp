// Shared checks of the chat parser tests (see parse_check.hpp).
#include "parse_check.hpp"

#include "chat/output_parser.hpp"

namespace dsv41::test {

namespace {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

bool is_call_id(const std::string& id) {
  if (id.size() != 29 || id.rfind("call_", 0) != 0) return false;
  for (size_t i = 5; i < id.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(id[i]))) return false;
  return true;
}

}  // namespace

chat::ParsedMessage parse_in_chunks(std::string_view text, const std::vector<size_t>& cuts,
                                    bool thinking) {
  chat::OutputParser parser({thinking, 7});
  std::vector<chat::ParseEvent> events;
  size_t prev = 0;
  for (size_t cut : cuts) {
    parser.feed(text.substr(prev, cut - prev), events);
    prev = cut;
  }
  parser.feed(text.substr(prev), events);
  parser.finish(events);
  // Invariants: deltas are valid UTF-8 on their own (the input is), tool-call events come as
  // start, arguments..., end with consecutive indices, and kFinish is last.
  int open = -1, next_index = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (!e.text.empty()) REQUIRE(valid_utf8(e.text));
    switch (e.kind) {
      case chat::ParseEvent::Kind::kToolCallStart:
        REQUIRE(open == -1);
        REQUIRE(e.index == next_index);
        REQUIRE(is_call_id(e.id));
        open = e.index;
        break;
      case chat::ParseEvent::Kind::kToolCallArguments:
        REQUIRE(e.index == open);
        break;
      case chat::ParseEvent::Kind::kToolCallEnd:
        REQUIRE(e.index == open);
        open = -1;
        ++next_index;
        break;
      case chat::ParseEvent::Kind::kFinish:
        REQUIRE(i + 1 == events.size());
        break;
      default:
        REQUIRE(open == -1);
    }
  }
  REQUIRE(!events.empty());
  REQUIRE(events.back().kind == chat::ParseEvent::Kind::kFinish);
  chat::MessageAccumulator acc;
  acc.apply(events);
  chat::ParsedMessage out = std::move(acc.message());
  out.warnings = parser.warnings();
  out.saw_eos = parser.saw_eos();
  return out;
}

std::vector<size_t> code_point_cuts(std::string_view text) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) cuts.push_back(i);
  return cuts;
}

std::string normal_json(std::string_view json_text) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  const auto error = parser.parse(std::string(json_text)).get(e);
  INFO("JSON: " << json_text);
  REQUIRE(!error);
  return json::python_dumps(e);
}

void check_expected(const chat::ParsedMessage& got, simdjson::dom::element expected) {
  CHECK(got.reasoning_content == std::string_view(expected["reasoning_content"]));
  CHECK(got.content == std::string_view(expected["content"]));
  simdjson::dom::array calls = expected["tool_calls"];
  REQUIRE(got.tool_calls.size() == calls.size());
  size_t i = 0;
  for (simdjson::dom::element call : calls) {
    const auto& g = got.tool_calls[i++];
    CHECK(g.name == std::string_view(call["name"]));
    CHECK(g.arguments_json == std::string_view(call["arguments_text_reference"]));
    CHECK(normal_json(g.arguments_json) == json::python_dumps(call["arguments"]));
  }
}

}  // namespace dsv41::test
