#include "api/metrics.hpp"

#include <fmt/format.h>

namespace dsv41::server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += value;
  count_++;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, sum_);
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

// Bucket bounds as vLLM's loggers.py uses them (seconds).
ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
             1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
            20.0, 40.0, 80.0}),
      e2e_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {}

void ServerMetrics::observe_time_to_first_token(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(s);
}
void ServerMetrics::observe_inter_token_latency(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(s);
}
void ServerMetrics::observe_e2e_latency(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_.observe(s);
}
void ServerMetrics::count_request(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[reason]++;
}

std::string ServerMetrics::render(const EngineStats& st, const std::string& model) const {
  // Label values escape \\, " and newline (Prometheus text format): a served model name with a
  // quote otherwise broke the parse of the whole scrape.
  std::string model_label;
  for (char c : model) {
    if (c == '\\' || c == '"') model_label += '\\';
    model_label += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  const std::string labels = fmt::format("model_name=\"{}\",engine=\"0\"", model_label);
  std::string out;
  auto gauge = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name,
                       labels, v);
  };
  auto counter = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {0}_total {1}\n# TYPE {0}_total counter\n{0}_total{{{2}}} {3}\n",
                       name, help, labels, v);
  };
  gauge("vllm:num_requests_running", "Requests in the decode batch.", double(st.running));
  gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.", double(st.waiting));
  const double usage =
      st.kv_bytes_total > 0 ? double(st.kv_bytes_used) / double(st.kv_bytes_total) : 0.0;
  gauge("vllm:kv_cache_usage_perc", "State budget in use, 0..1.", usage);
  counter("vllm:prompt_tokens", "Prefilled prompt tokens.", st.prompt_tokens_total);
  counter("vllm:generation_tokens", "Generated tokens.", st.generation_tokens_total);
  counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
          st.prefix_cache_queries);
  counter("vllm:prefix_cache_hits", "Prompt tokens served from the prefix cache.",
          st.prefix_cache_hits);
  counter("vllm:spec_decode_num_draft_tokens", "Draft tokens verified (speculative decoding).",
          st.spec_draft_tokens_total);
  counter("vllm:spec_decode_num_accepted_tokens", "Draft tokens accepted.",
          st.spec_accepted_tokens_total);
  std::lock_guard<std::mutex> lock(mu_);
  out +=
      "# HELP vllm:request_success_total Finished requests by reason.\n"
      "# TYPE vllm:request_success_total counter\n";
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    auto it = finished_.find(reason);
    out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", labels,
                       reason, it == finished_.end() ? 0 : it->second);
  }
  auto histogram = [&](const Histogram& h, const char* name, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    h.render(out, name, labels);
  };
  histogram(ttft_, "vllm:time_to_first_token_seconds", "Time to first token.");
  histogram(itl_, "vllm:inter_token_latency_seconds", "Time between output tokens.");
  histogram(e2e_, "vllm:e2e_request_latency_seconds", "Request latency, arrival to finish.");
  return out;
}

}  // namespace dsv41::server
