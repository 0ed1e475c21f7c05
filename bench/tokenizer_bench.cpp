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
#include <sstream>
#include <string>
#include <vector>

#include "synthetic/synthetic_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

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
  const std::string full_json = dsv41::synth::synthetic_tokenizer_json(tiny_json, 129280);
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
