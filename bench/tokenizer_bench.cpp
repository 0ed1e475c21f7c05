// Tokenizer speed on one core: load time of a full-size (129,280 ids, 127,741 merges) synthetic
// tokenizer.json with the DeepSeek header, and encode/decode throughput on mixed text made by
// repeating the golden texts. Usage: dsv41_bench_tokenizer [MB of text, default 32]
// [tokenizer.json to also time, e.g. the real one]. Results go to docs/perf.md.
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "tokenizer/byte_level.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace byte_level = dsv41::byte_level;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of this thread: the dev machine is shared, so wall time alone over-reports.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::exit(1);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The tiny golden file's header (normalizer .. decoder, verbatim DeepSeek sections) with a
// generated model: 256 byte tokens + 127,741 random merges of existing tokens, ids padded to
// 129,280 with added placeholder tokens, as in the real vocabulary.
std::string synthetic_full_size_json(const std::string& tiny) {
  constexpr int kMerges = 127741, kIds = 129280;
  const size_t h0 = tiny.find("\"normalizer\""), h1 = tiny.find("\"model\"");
  std::mt19937 rng(7);
  std::vector<std::string> tokens;
  std::unordered_set<std::string> seen;
  for (int b = 0; b < 256; ++b)
    tokens.emplace_back(1, static_cast<char>(b)), seen.insert(tokens.back());
  std::string merges, vocab;
  for (int i = 0; i < 256; ++i)
    vocab += (i ? ", " : "") + quote(byte_level::encode(tokens[i])) + ": " + std::to_string(i);
  while (static_cast<int>(tokens.size()) < 256 + kMerges) {
    const std::string& l = tokens[rng() % tokens.size()];
    const std::string& r = tokens[rng() % std::min<size_t>(tokens.size(), 4096)];
    if (l.size() + r.size() > 16 || !seen.insert(l + r).second) continue;
    merges += std::string(merges.empty() ? "" : ", ") + "[" + quote(byte_level::encode(l)) + ", " +
              quote(byte_level::encode(r)) + "]";
    tokens.push_back(l + r);
    vocab +=
        ", " + quote(byte_level::encode(tokens.back())) + ": " + std::to_string(tokens.size() - 1);
  }
  std::string added;
  for (int id = static_cast<int>(tokens.size()); id < kIds; ++id)
    added += std::string(added.empty() ? "" : ", ") + "{\"id\": " + std::to_string(id) +
             ", \"content\": \"<｜place▁holder▁no▁" + std::to_string(id) +
             "｜>\", \"normalized\": false, \"special\": true}";
  return "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [" +
         added + "], " + tiny.substr(h0, h1 - h0) +
         "\"model\": {\"type\": \"BPE\", \"byte_fallback\": false, \"vocab\": {" + vocab +
         "}, \"merges\": [" + merges + "]}}";
}

// The golden encode texts (mixed scripts, code, JSON, emoji, specials), repeated to `bytes`.
std::string mixed_text(size_t bytes) {
  const std::string jsonl = read_file(DSV41_FIXTURES_DIR "/golden/tokenizer/encode_cases.jsonl");
  simdjson::dom::parser parser;
  std::string unit;
  std::istringstream lines(jsonl);
  std::string line;
  while (std::getline(lines, line)) {
    simdjson::padded_string p(line);
    simdjson::dom::object o;
    std::string_view text;
    if (!parser.parse(p).get(o) && !o["text"].get(text)) unit.append(text).append("\n");
  }
  std::string out;
  while (out.size() < bytes) out += unit;
  return out;
}

void time_load(const std::string& label, const std::string& json) {
  const auto t0 = Clock::now();
  const double c0 = thread_cpu_seconds();
  auto tok = dsv41::Tokenizer::from_json(json, label);
  std::printf("load %-28s %8.1f ms cpu %8.1f ms wall  (%zu ids, %.1f MB of JSON)\n", label.c_str(),
              (thread_cpu_seconds() - c0) * 1e3, seconds_since(t0) * 1e3, tok->vocab_size(),
              json.size() / 1e6);
}

void time_encode(const std::string& label, const dsv41::Tokenizer& tok, const std::string& text) {
  auto t0 = Clock::now();
  double c0 = thread_cpu_seconds();
  const auto ids = tok.encode(text, /*parse_special=*/true);
  const double enc = thread_cpu_seconds() - c0, enc_wall = seconds_since(t0);
  c0 = thread_cpu_seconds();
  const std::string back = tok.decode(ids);
  const double dec = thread_cpu_seconds() - c0;
  std::printf(
      "encode %-26s %6.2f MB/s cpu %6.2f MB/s wall  (%.1f MB -> %zu ids)  decode %.1f MB/s cpu  "
      "%s\n",
      label.c_str(), text.size() / 1e6 / enc, text.size() / 1e6 / enc_wall, text.size() / 1e6,
      ids.size(), back.size() / 1e6 / dec, back == text ? "round-trip ok" : "ROUND-TRIP MISMATCH");
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mb = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 32;
  const std::string tiny_path = DSV41_FIXTURES_DIR "/golden/tokenizer/tiny_tokenizer.json";
  const std::string tiny_json = read_file(tiny_path);
  const std::string full_json = synthetic_full_size_json(tiny_json);
  const std::string text = mixed_text(mb << 20);

  time_load("tiny (1,738 ids)", tiny_json);
  time_load("synthetic full size", full_json);
  auto tiny = dsv41::Tokenizer::from_json(tiny_json, "tiny");
  auto full = dsv41::Tokenizer::from_json(full_json, "synthetic");
  time_encode("tiny (1,738 ids)", *tiny, text);
  time_encode("synthetic full size", *full, text);
  if (argc > 2) {
    const std::string real = read_file(argv[2]);
    time_load(argv[2], real);
    auto tok = dsv41::Tokenizer::from_json(real, argv[2]);
    time_encode(argv[2], *tok, text);
  }
  return 0;
}
