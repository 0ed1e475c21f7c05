// Server-side Prometheus metrics under vLLM's names (api-and-clients.md §2.11): latency histograms
// measured from the handler's view of the event stream, request outcomes, and the engine's own
// counters/gauges read at scrape time (EngineStats). Text exposition format 0.0.4.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dsv41/engine.hpp"

namespace dsv41::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // "<name>_bucket{labels,le=...} n" lines plus _sum and _count.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_e2e_latency(double seconds);
  // finished_reason: "stop", "length", "abort", "error".
  void count_request(const std::string& finished_reason);

  std::string render(const EngineStats& stats, const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  std::map<std::string, uint64_t> finished_;
};

}  // namespace dsv41::server
