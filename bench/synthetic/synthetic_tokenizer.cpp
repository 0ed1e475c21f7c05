#include "synthetic/synthetic_tokenizer.hpp"

#include <algorithm>
#include <random>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/check.hpp"
#include "tokenizer/byte_level.hpp"

namespace dsv41::synth {
namespace {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string synthetic_tokenizer_json(const std::string& base_json, int64_t n_ids) {
  constexpr int64_t kMaxMerges = 127741;  // the released vocabulary's merge count
  DSV41_CHECK(n_ids >= 256, kInvalidArgument,
              "synthetic tokenizer: {} ids, fewer than the 256 byte tokens", n_ids);
  const size_t h0 = base_json.find("\"normalizer\""), h1 = base_json.find("\"model\"");
  DSV41_CHECK(h0 != std::string::npos && h1 != std::string::npos && h0 < h1, kInvalidArgument,
              "synthetic tokenizer: the base tokenizer.json has no \"normalizer\" .. \"model\" "
              "sections");
  const int64_t n_tokens = std::min(n_ids, 256 + kMaxMerges);
  std::mt19937 rng(7);
  std::vector<std::string> tokens;
  std::unordered_set<std::string> seen;
  for (int b = 0; b < 256; ++b)
    tokens.emplace_back(1, static_cast<char>(b)), seen.insert(tokens.back());
  std::string merges, vocab;
  for (int i = 0; i < 256; ++i)
    vocab += (i ? ", " : "") + quote(byte_level::encode(tokens[i])) + ": " + std::to_string(i);
  while (static_cast<int64_t>(tokens.size()) < n_tokens) {
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
  for (int64_t id = n_tokens; id < n_ids; ++id)
    added += std::string(added.empty() ? "" : ", ") + "{\"id\": " + std::to_string(id) +
             ", \"content\": \"<｜place▁holder▁no▁" + std::to_string(id) +
             "｜>\", \"normalized\": false, \"special\": true}";
  return "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [" +
         added + "], " + base_json.substr(h0, h1 - h0) +
         "\"model\": {\"type\": \"BPE\", \"byte_fallback\": false, \"vocab\": {" + vocab +
         "}, \"merges\": [" + merges + "]}}";
}

}  // namespace dsv41::synth
