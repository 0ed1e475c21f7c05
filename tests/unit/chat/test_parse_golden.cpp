// Output parsing against the reference parser's goldens: whole texts (parse_cases), the recorded
// split points, every byte position, one code point per chunk (stream_cases), and the malformed
// outputs of parse_reject_cases (lenient: no crash, no DSML in text, a warning).
#include <catch2/catch.hpp>
#include <map>

#include "chat/parsed_message.hpp"
#include "golden_cases.hpp"
#include "parse_check.hpp"

using namespace dsv41;
using namespace dsv41::chat;
using dsv41::test::str;

namespace {

bool thinking_of(simdjson::dom::element row) { return str(row["thinking_mode"]) == "thinking"; }

std::vector<size_t> cuts_of(simdjson::dom::element list) {
  std::vector<size_t> cuts;
  for (simdjson::dom::element e : simdjson::dom::array(list)) cuts.push_back(uint64_t(e));
  return cuts;
}

// Code-point offsets → byte offsets.
std::vector<size_t> char_cuts_to_bytes(std::string_view text, const std::vector<size_t>& cuts) {
  std::vector<size_t> starts{0};
  for (size_t b : test::code_point_cuts(text)) starts.push_back(b);
  starts.push_back(text.size());
  std::vector<size_t> out;
  for (size_t c : cuts) out.push_back(starts.at(c));
  return out;
}

}  // namespace

TEST_CASE("chat parse_cases: whole texts parse to the reference result without warnings",
          "[unit][chat]") {
  const auto rows = test::read_chat_golden("parse_cases.jsonl");
  REQUIRE(rows.size() == 32);
  for (const auto& row : rows) {
    INFO("case " << row.name);
    const std::string raw = str(row.root["raw_output"]);
    const ParsedMessage got = parse_completion(raw, {thinking_of(row.root), 1});
    test::check_expected(got, row.root["expected"]);
    CHECK(got.warnings.empty());
    CHECK(got.saw_eos == bool(row.root["ends_with_eos"]));
    // Also fed one byte at a time.
    std::vector<size_t> every;
    for (size_t i = 1; i < raw.size(); ++i) every.push_back(i);
    test::check_expected(test::parse_in_chunks(raw, every, thinking_of(row.root)),
                         row.root["expected"]);
  }
}

TEST_CASE("chat stream_cases: recorded split points, every byte position, one code point per chunk",
          "[unit][chat]") {
  const auto rows = test::read_chat_golden("stream_cases.jsonl");
  REQUIRE(rows.size() == 12);
  for (const auto& row : rows) {
    INFO("case " << row.name);
    const std::string raw = str(row.root["raw_output"]);
    const bool thinking = thinking_of(row.root);
    const simdjson::dom::element expected = row.root["expected"];
    for (const char* scheme : {"random", "markers_and_random"}) {
      INFO("scheme " << scheme);
      const auto bytes = cuts_of(row.root["split_points_utf8_bytes"][scheme]);
      const auto chars = cuts_of(row.root["split_points_chars"][scheme]);
      REQUIRE(char_cuts_to_bytes(raw, chars) == bytes);
      const auto got = test::parse_in_chunks(raw, bytes, thinking);
      test::check_expected(got, expected);
      CHECK(got.warnings.empty());
    }
    test::check_expected(test::parse_in_chunks(raw, test::code_point_cuts(raw), thinking),
                         expected);
    for (size_t cut = 1; cut < raw.size(); ++cut) {
      INFO("two chunks cut at byte " << cut);
      test::check_expected(test::parse_in_chunks(raw, {cut}, thinking), expected);
    }
  }
}

TEST_CASE("chat parse_reject_cases: lenient results, no DSML leaks, warnings (docs/chat.md)",
          "[unit][chat]") {
  struct Outcome {
    std::string reasoning, content;
    std::vector<std::string> call_arguments;  // one JSON text per recovered call
    std::string warning;                      // a substring of some warning
  };
  // The documented lenient outcome of each malformed output.
  const std::map<std::string, Outcome> expected = {
      {"thinking_missing_think_end",
       {"I am still thinking and never close", "", {}, "missing </think>"}},
      {"thinking_tool_block_before_think_end",
       {"reasoning", "", {R"({"city": "Paris"})"}, "tool-call block inside reasoning"}},
      {"content_without_eos", {"", "Hello there", {}, ""}},
      {"v4_unspaced_dsml_tags", {"", "x", {"{}"}, ""}},
      {"text_after_calls_block", {"", "trailing text", {R"({"city": "Paris"})"}, ""}},
      {"calls_block_without_blank_line", {"", "x", {}, ""}},
      {"truncated_inside_parameter",
       {"", "", {R"({"city": "Par"})"}, "output ended inside a parameter value"}},
      {"duplicate_parameter", {"", "", {R"({"a": "1"})"}, "duplicate parameter 'a' dropped"}},
      {"bad_string_flag", {"", "", {R"({"a": 1})"}, "string=\"yes\" is not true|false"}},
      {"think_token_inside_content", {" b", "a ", {}, "<think> in content"}},
      {"eos_inside_reasoning_is_not_special",
       {"r", "", {}, "text after the end-of-sentence marker dropped"}},
  };
  const auto rows = test::read_chat_golden("parse_reject_cases.jsonl");
  REQUIRE(rows.size() == expected.size());
  for (const auto& row : rows) {
    INFO("case " << row.name);
    REQUIRE(expected.count(row.name) == 1);
    const Outcome& want = expected.at(row.name);
    const std::string raw = str(row.root["raw_output"]);
    std::vector<size_t> every;
    for (size_t i = 1; i < raw.size(); ++i) every.push_back(i);
    for (const auto& cuts : {std::vector<size_t>{}, every}) {
      const ParsedMessage got = test::parse_in_chunks(raw, cuts, thinking_of(row.root));
      CHECK(got.reasoning_content == want.reasoning);
      CHECK(got.content == want.content);
      CHECK(got.content.find("｜DSML｜") == std::string::npos);
      CHECK(got.reasoning_content.find("｜DSML｜") == std::string::npos);
      REQUIRE(got.tool_calls.size() == want.call_arguments.size());
      for (size_t i = 0; i < got.tool_calls.size(); ++i)
        CHECK(got.tool_calls[i].arguments_json == want.call_arguments[i]);
      if (!want.warning.empty()) {
        bool found = false;
        for (const auto& w : got.warnings) found |= w.find(want.warning) != std::string::npos;
        INFO("warnings: " << got.warnings.size());
        CHECK(found);
      }
    }
  }
}

TEST_CASE("chat parser: dropped markup never splices text into a DSML anchor", "[unit][chat]") {
  // Found by the fuzz smoke test: the bytes of "｜" split around a stray </think> (and text after
  // a calls block) would join, in the concatenated content, into "<｜DSML｜".
  const std::string spliced =
      "x\n\n<\xef\xbd</think>\x9c"
      "DSML｜ calls>\n</｜DSML｜ calls><｜end▁of▁sentence｜>";
  const std::string after_block = "a<\n\n<｜DSML｜ calls>\n</｜DSML｜ calls>｜DSML｜ x>b";
  for (const std::string& raw : {spliced, after_block}) {
    std::vector<size_t> every;
    for (size_t i = 1; i < raw.size(); ++i) every.push_back(i);
    for (const auto& cuts : {std::vector<size_t>{}, every, std::vector<size_t>{9}}) {
      const ParsedMessage got = test::parse_in_chunks(raw, cuts, false);
      CHECK(got.content.find("<｜DSML｜") == std::string::npos);
      CHECK_FALSE(got.warnings.empty());
    }
  }
}

TEST_CASE("chat parser: a stray DSML anchor does not take the next marker's '>'", "[unit][chat]") {
  // In a parameter value (a file that mentions the marker): the anchor is value text and the
  // real closing tag still closes the value (it swallowed the closing tag, then the next one).
  const std::string value =
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n"
      "<｜DSML｜ parameter name=\"s\" string=\"true\">a <｜DSML｜ b</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"n\" string=\"false\">5</｜DSML｜ parameter>\n"
      "</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  // In reasoning: only the anchor is dropped; </think> still ends the reasoning (it was taken as
  // the anchor's '>' and the answer landed in reasoning).
  const std::string reasoning = "I will use <｜DSML｜ now</think>The answer is 4.";
  for (const auto& [raw, thinking] : {std::pair{value, false}, std::pair{reasoning, true}}) {
    std::vector<std::vector<size_t>> schemes = {{}};
    std::vector<size_t> every;
    for (size_t i = 1; i < raw.size(); ++i) {
      every.push_back(i);
      schemes.push_back({i});
    }
    schemes.push_back(every);
    for (const auto& cuts : schemes) {
      INFO(raw << " in " << cuts.size() + 1 << " chunks, first cut "
               << (cuts.empty() ? 0 : cuts[0]));
      const ParsedMessage got = test::parse_in_chunks(raw, cuts, thinking);
      if (!thinking) {
        REQUIRE(got.tool_calls.size() == 1);
        CHECK(got.tool_calls[0].arguments_json == R"({"s": "a <｜DSML｜ b", "n": 5})");
      } else {
        CHECK(got.reasoning_content == "I will use  now");
        CHECK(got.content == "The answer is 4.");
      }
    }
  }
}
