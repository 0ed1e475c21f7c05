// `dsv41 render` (request JSON on stdin → the exact prompt, or its token ids) and `dsv41 parse`
// (generated text on stdin → {"reasoning_content", "content", "tool_calls"} JSON). See
// docs/chat.md.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "chat/parsed_message.hpp"
#include "chat/prompt_renderer.hpp"
#include "chat/request_json.hpp"
#include "cli_args.hpp"
#include "core/check.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using dsv41::cli::Args;
using dsv41::cli::UsageError;

std::string read_stdin() {
  std::string in{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  DSV41_CHECK(!std::cin.bad(), kIo, "reading stdin failed");
  return in;
}

void write_stdout(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

template <typename T>
T value_or_throw(dsv41::Result<T> result) {
  if (!result.is_ok())
    throw dsv41::detail::Failure(result.status().code(), result.status().message(), __FILE__,
                                 __LINE__);
  return std::move(result).value();
}

// stdin: {"messages", "tools", "options"} (or a full /v1/chat/completions body). Prints the
// prompt with no newline added; with --ids, the token ids as one JSON array line instead.
int run_render(const Args& args) {
  args.allow({"tokenizer", "model", "ids", "effort-table"});
  const auto file = args.get("tokenizer");
  const auto dir = args.get("model");
  if (file && dir) throw UsageError("give at most one of --tokenizer FILE or --model DIR");
  const bool ids = args.flag("ids");
  if (ids && !file && !dir) throw UsageError("--ids needs --tokenizer FILE or --model DIR");
  const std::string table_name = args.get("effort-table").value_or("release");
  if (table_name != "release" && table_name != "prerelease")
    throw UsageError("--effort-table must be release or prerelease, got '" + table_name + "'");
  const auto table = table_name == "release" ? dsv41::chat::EffortTable::release()
                                             : dsv41::chat::EffortTable::prerelease();

  const auto request = value_or_throw(dsv41::chat::parse_chat_request_json(read_stdin()));
  const auto resolved =
      dsv41::chat::resolve_options(request.options, !request.tools.empty(), table);
  const auto prompt = value_or_throw(dsv41::chat::render_request(request, resolved));
  if (!ids) {
    write_stdout(prompt.text);
    return 0;
  }
  const auto tok = dsv41::Tokenizer::load(file ? *file : *dir + "/tokenizer.json");
  const auto token_ids = tok->encode(prompt.text, /*parse_special=*/true);
  std::string out = "[";
  for (size_t i = 0; i < token_ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(token_ids[i]);
  write_stdout(out + "]\n");
  return 0;
}

// stdin: the text generated after the prompt's <｜Assistant｜><think> (--thinking) or
// <｜Assistant｜></think>. Parser warnings go to stderr as "warning: ..." lines; exit code 0.
int run_parse(const Args& args) {
  args.allow({"thinking", "seed"});
  dsv41::chat::ParserOptions options;
  options.thinking = args.flag("thinking");
  if (args.has("seed")) options.seed = static_cast<uint64_t>(args.get_int("seed", 0));
  const auto message = dsv41::chat::parse_completion(read_stdin(), options);
  write_stdout(dsv41::chat::parsed_message_json(message) + "\n");
  for (const auto& w : message.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return 0;
}

const dsv41::cli::Registration render_reg{
    {"render", "[--tokenizer FILE | --model DIR] [--ids] [--effort-table release|prerelease]",
     "render a chat request (stdin JSON: messages, tools, options) to the exact prompt text; "
     "--ids prints its token ids instead",
     &run_render}};
const dsv41::cli::Registration parse_reg{
    {"parse", "[--thinking] [--seed N]",
     "parse generated text (stdin) into {reasoning_content, content, tool_calls} JSON",
     &run_parse}};

}  // namespace
