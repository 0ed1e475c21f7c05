// `dsv41 tokenize` (stdin text -> JSON id array) and `dsv41 detokenize` (stdin JSON id array ->
// text). Both read the tokenizer from --tokenizer FILE or --model DIR (DIR/tokenizer.json).
#include <simdjson.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli_args.hpp"
#include "core/check.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using dsv41::cli::Args;
using dsv41::cli::UsageError;

std::unique_ptr<dsv41::Tokenizer> load_tokenizer(const Args& args) {
  const auto file = args.get("tokenizer");
  const auto dir = args.get("model");
  if (file.has_value() == dir.has_value())
    throw UsageError("give exactly one of --tokenizer FILE or --model DIR");
  return dsv41::Tokenizer::load(file ? *file : *dir + "/tokenizer.json");
}

std::string read_stdin() {
  std::string in{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  DSV41_CHECK(!std::cin.bad(), kIo, "reading stdin failed");
  return in;
}

// The whole of stdin, byte for byte (a trailing newline is text too).
int run_tokenize(const Args& args) {
  args.allow({"tokenizer", "model", "special"});
  const bool special = args.flag("special");
  const auto tok = load_tokenizer(args);
  const auto ids = tok->encode(read_stdin(), special);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// Prints exactly the decoded text (no newline added).
int run_detokenize(const Args& args) {
  args.allow({"tokenizer", "model"});
  const auto tok = load_tokenizer(args);
  const simdjson::padded_string input(read_stdin());
  simdjson::dom::parser parser;
  simdjson::dom::array arr;
  const auto err = parser.parse(input).get(arr);
  DSV41_CHECK(!err, kInvalidArgument, "stdin must be a JSON array of token ids ({})",
              simdjson::error_message(err));
  std::vector<int32_t> ids;
  size_t i = 0;
  for (simdjson::dom::element e : arr) {
    int64_t id = 0;
    DSV41_CHECK(!e.get(id), kInvalidArgument, "element {} of the id array is not an integer", i);
    DSV41_CHECK(id >= INT32_MIN && id <= INT32_MAX, kInvalidArgument,
                "element {} of the id array ({}) is out of range", i, id);
    ids.push_back(static_cast<int32_t>(id));
    ++i;
  }
  const std::string text = tok->decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const dsv41::cli::Registration tokenize_reg{
    {"tokenize", "--tokenizer FILE | --model DIR [--special]",
     "encode stdin (raw bytes, UTF-8) to a JSON array of token ids; --special parses special "
     "tokens",
     &run_tokenize}};
const dsv41::cli::Registration detokenize_reg{{"detokenize", "--tokenizer FILE | --model DIR",
                                               "decode a JSON array of token ids on stdin to text",
                                               &run_detokenize}};

}  // namespace
