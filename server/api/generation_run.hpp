// What /v1/chat/completions and /v1/completions share around one engine request: request JSON
// parsing, fitting max_tokens into the context (§2.10 context overflow), submission with
// cancellation wired to the response channel, latency metrics, and SSE/id helpers.
#pragma once

#include <simdjson.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/api.hpp"
#include "api/request_fields.hpp"

namespace dsv41::server {

// Parses the body (kInvalidArgument "body: ..." for bad JSON or a non-object). The parser owns
// the document the returned element points into.
simdjson::dom::element parse_body(simdjson::dom::parser& parser, const std::string& body);

// The model field must name the served model (404 otherwise, as vLLM); absent is accepted.
std::optional<HttpResponse> check_model(const Api& api, const GenerationFields& fields);

// Sets request.stop.max_tokens: `requested` (or no limit) when prompt + requested fits
// max_context; else shrunk to the room left when clamping (min_tokens with it), else
// kContextOverflow naming both numbers. A prompt that alone fills the context is always
// kContextOverflow; min_tokens above the resulting max_tokens is kInvalidArgument naming it.
Status fit_context(std::string_view prompt_field, int64_t prompt_tokens,
                   std::optional<int64_t> requested, int64_t max_context, bool clamp,
                   StopParams& stop);

// Per-request latency bookkeeping (called on the backend thread only).
class RequestClock {
 public:
  RequestClock() : start_(std::chrono::steady_clock::now()), last_(start_) {}
  void on_token(ServerMetrics& metrics);
  void on_finish(ServerMetrics& metrics, const std::string& finished_reason);

 private:
  std::chrono::steady_clock::time_point start_, last_;
  bool first_ = true;
};

// Submits; on success the channel's cancel (client gone) cancels the engine request.
Status submit_request(const std::shared_ptr<GenerationBackend>& backend, GenerationRequest request,
                      const std::shared_ptr<ResponseChannel>& channel, EventCallback on_event);

// "<prefix>" + 24 random hex digits.
std::string random_id(std::string_view prefix);
int64_t unix_now();
// "data: <json>\n\n".
std::string sse_event(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// Error event for a failed or cancelled stream (§2.10 mid-stream errors).
std::string sse_error(const Status& status);
// The metrics label of a finish: "stop", "length", "abort" (cancelled) or "error".
std::string finished_label(const GenerationEvent& event);

}  // namespace dsv41::server
