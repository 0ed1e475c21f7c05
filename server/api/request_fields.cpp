#include "api/request_fields.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/check.hpp"

namespace dsv41::server {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

std::optional<element> field(element root, const char* key) {
  element v;
  if (root.at_key(key).get(v) || v.is_null()) return std::nullopt;
  return v;
}

bool is_number(element v) {
  auto t = v.type();
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

double number(element v, const std::string& name) {
  DSV41_CHECK(is_number(v), kInvalidArgument, "{}: expected a number", name);
  double d = 0;
  if (v.type() == element_type::INT64) return double(int64_t(v));
  if (v.type() == element_type::UINT64) return double(uint64_t(v));
  DSV41_CHECK(!v.get_double().get(d), kInvalidArgument, "{}: expected a number", name);
  DSV41_CHECK(std::isfinite(d), kInvalidArgument, "{}: must be finite", name);
  return d;
}

int64_t integer(element v, const std::string& name) {
  DSV41_CHECK(v.type() == element_type::INT64 ||
                  (v.type() == element_type::DOUBLE && double(v) == std::floor(double(v)) &&
                   std::fabs(double(v)) < 9e15),
              kInvalidArgument, "{}: expected an integer", name);
  return v.type() == element_type::INT64 ? int64_t(v) : int64_t(double(v));
}

bool boolean(element v, const std::string& name) {
  DSV41_CHECK(v.type() == element_type::BOOL, kInvalidArgument, "{}: expected a boolean", name);
  return bool(v);
}

void read_float(element root, const char* key, float& out) {
  if (auto v = field(root, key)) out = static_cast<float>(number(*v, key));
}

void read_stop(element v, StopParams& stop) {
  if (v.type() == element_type::STRING) {
    std::string s{std::string_view(v)};
    DSV41_CHECK(!s.empty(), kInvalidArgument, "stop: must not be an empty string");
    stop.stop.push_back(std::move(s));
    return;
  }
  DSV41_CHECK(v.type() == element_type::ARRAY, kInvalidArgument,
              "stop: expected a string or a list of strings");
  size_t i = 0;
  for (element s : simdjson::dom::array(v)) {
    DSV41_CHECK(s.type() == element_type::STRING, kInvalidArgument, "stop[{}]: expected a string",
                i);
    DSV41_CHECK(!std::string_view(s).empty(), kInvalidArgument, "stop[{}]: must not be empty", i);
    stop.stop.emplace_back(std::string_view(s));
    ++i;
  }
}

}  // namespace

GenerationFields parse_generation_fields(element root, Endpoint endpoint, int64_t vocab_size) {
  DSV41_CHECK(root.type() == element_type::OBJECT, kInvalidArgument,
              "body: expected a JSON object");
  GenerationFields g;
  if (auto v = field(root, "model")) {
    DSV41_CHECK(v->type() == element_type::STRING, kInvalidArgument, "model: expected a string");
    g.model = std::string(std::string_view(*v));
  }
  if (auto v = field(root, "n")) {
    const int64_t n = integer(*v, "n");
    DSV41_CHECK(n == 1, kInvalidArgument, "n: only n = 1 is supported (got {})", n);
  }
  read_float(root, "temperature", g.sampling.temperature);
  read_float(root, "top_p", g.sampling.top_p);
  read_float(root, "min_p", g.sampling.min_p);
  read_float(root, "presence_penalty", g.sampling.presence_penalty);
  read_float(root, "frequency_penalty", g.sampling.frequency_penalty);
  read_float(root, "repetition_penalty", g.sampling.repetition_penalty);
  if (auto v = field(root, "top_k")) {
    const int64_t k = integer(*v, "top_k");  // range first: a cast would wrap 2^32 + 1 to 1
    DSV41_CHECK(k >= -1 && k <= INT32_MAX, kInvalidArgument,
                "top_k: {} is outside [-1, 2147483647]", k);
    g.sampling.top_k = static_cast<int32_t>(k);
  }
  if (auto v = field(root, "seed")) g.sampling.seed = integer(*v, "seed");
  if (auto v = field(root, "logit_bias")) {
    DSV41_CHECK(v->type() == element_type::OBJECT, kInvalidArgument,
                "logit_bias: expected an object of token id → bias");
    for (auto [key, bias] : simdjson::dom::object(*v)) {
      const std::string k(key);
      const std::string name = "logit_bias." + k;
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(k, &used);
      } catch (...) {
        used = 0;
      }
      DSV41_CHECK(used == k.size() && id >= 0 && id < vocab_size, kInvalidArgument,
                  "{}: key must be a token id in [0, {})", name, vocab_size);
      const double b = number(bias, name);
      // OpenAI's documented range.
      DSV41_CHECK(b >= -100 && b <= 100, kInvalidArgument, "{}: bias {} must be in [-100, 100]",
                  name, b);
      g.sampling.logit_bias[static_cast<int32_t>(id)] = static_cast<float>(b);
    }
  }
  if (auto v = field(root, "stop")) read_stop(*v, g.stop);
  if (auto v = field(root, "stop_token_ids")) {
    DSV41_CHECK(v->type() == element_type::ARRAY, kInvalidArgument,
                "stop_token_ids: expected a list of token ids");
    size_t i = 0;
    for (element id : simdjson::dom::array(*v)) {
      const std::string name = "stop_token_ids[" + std::to_string(i++) + "]";
      const int64_t t = integer(id, name);
      DSV41_CHECK(t >= 0 && t < vocab_size, kInvalidArgument, "{}: {} is not in [0, {})", name, t,
                  vocab_size);
      g.stop.stop_token_ids.push_back(static_cast<int32_t>(t));
    }
  }
  if (auto v = field(root, "ignore_eos")) g.stop.ignore_eos = boolean(*v, "ignore_eos");
  if (auto v = field(root, "include_stop_str_in_output"))
    g.stop.include_stop_str_in_output = boolean(*v, "include_stop_str_in_output");
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    if (auto v = field(root, key)) {
      const int64_t n = integer(*v, key);
      DSV41_CHECK(n >= 1, kInvalidArgument, "{}: {} must be >= 1", key, n);
      g.max_tokens = n;
      break;
    }
  }
  if (auto v = field(root, "min_tokens")) {
    g.stop.min_tokens = integer(*v, "min_tokens");
    DSV41_CHECK(g.stop.min_tokens >= 0, kInvalidArgument, "min_tokens: {} must be >= 0",
                g.stop.min_tokens);
    DSV41_CHECK(!g.max_tokens || g.stop.min_tokens <= *g.max_tokens, kInvalidArgument,
                "min_tokens: {} must be <= max_tokens ({})", g.stop.min_tokens, *g.max_tokens);
  }
  if (auto v = field(root, "stream")) g.stream = boolean(*v, "stream");
  if (auto v = field(root, "stream_options")) {
    DSV41_CHECK(v->type() == element_type::OBJECT, kInvalidArgument,
                "stream_options: expected an object");
    g.include_usage = true;  // vLLM: default true once the object is present
    if (auto u = field(*v, "include_usage"))
      g.include_usage = boolean(*u, "stream_options.include_usage");
    if (auto u = field(*v, "continuous_usage_stats"))
      g.continuous_usage = boolean(*u, "stream_options.continuous_usage_stats");
  }
  auto top_count = [](element v, const char* key) {
    const int64_t n = integer(v, key);
    DSV41_CHECK(n >= 0 && n <= kMaxTopLogprobs, kInvalidArgument, "{}: {} must be in [0, {}]", key,
                n, kMaxTopLogprobs);
    return static_cast<int>(n);
  };
  if (endpoint == Endpoint::kChat) {
    // logprobs: true turns them on; top_logprobs adds alternatives and needs it (vLLM's rule;
    // top_logprobs 0 alone is accepted as the no-op it is).
    const bool on = field(root, "logprobs") && boolean(*field(root, "logprobs"), "logprobs");
    int top = 0;
    if (auto v = field(root, "top_logprobs")) top = top_count(*v, "top_logprobs");
    DSV41_CHECK(on || top == 0, kInvalidArgument, "top_logprobs: {} needs \"logprobs\": true", top);
    if (on) g.top_logprobs = top;
    if (auto v = field(root, "parallel_tool_calls"))
      g.parallel_tool_calls = boolean(*v, "parallel_tool_calls");
  } else {
    if (auto v = field(root, "logprobs")) g.top_logprobs = top_count(*v, "logprobs");
    if (auto v = field(root, "echo")) g.echo = boolean(*v, "echo");

    if (auto v = field(root, "suffix")) {
      DSV41_CHECK(v->type() == element_type::STRING && std::string_view(*v).empty(),
                  kInvalidArgument, "suffix: not supported");
    }
  }
  Status s = g.sampling.validate();
  if (!s.is_ok()) {
    // "SamplerParams.top_p = 0 must be ..." -> "top_p: ...", so the error's param names the
    // request field (error_field, as vLLM fills param for validation errors).
    std::string m = s.message();
    constexpr std::string_view kPrefix = "SamplerParams.";
    if (m.rfind(kPrefix, 0) == 0) {
      m.erase(0, kPrefix.size());
      const size_t end = m.find_first_of(" =[");
      m = m.substr(0, end) + ": " + m;
    }
    DSV41_FAIL(kInvalidArgument, "{}", m);
  }
  return g;
}

}  // namespace dsv41::server
