#include "api/generation_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <random>

#include "api/api_errors.hpp"
#include "core/check.hpp"

namespace dsv41::server {

simdjson::dom::element parse_body(simdjson::dom::parser& parser, const std::string& body) {
  simdjson::dom::element root;
  const auto err = parser.parse(body).get(root);
  DSV41_CHECK(!err, kInvalidArgument, "body: invalid JSON ({})", simdjson::error_message(err));
  DSV41_CHECK(root.type() == simdjson::dom::element_type::OBJECT, kInvalidArgument,
              "body: expected a JSON object");
  return root;
}

std::optional<HttpResponse> check_model(const Api& api, const GenerationFields& fields) {
  if (fields.model && *fields.model != api.config().served_model_name)
    return error_response(404,
                          fmt::format("model '{}' does not exist; this server serves '{}'",
                                      *fields.model, api.config().served_model_name),
                          "model");
  return std::nullopt;
}

Status fit_context(std::string_view prompt_field, int64_t prompt_tokens,
                   std::optional<int64_t> requested, int64_t max_context, bool clamp,
                   StopParams& stop) {
  if (prompt_tokens >= max_context)
    return Status(ErrorCode::kContextOverflow,
                  fmt::format("{}: the prompt has {} tokens, which leaves no room to "
                              "generate within the maximum context of {} tokens",
                              prompt_field, prompt_tokens, max_context));
  const int64_t room = max_context - prompt_tokens;
  if (!requested) {
    stop.max_tokens = kNoTokenLimit;
  } else if (*requested <= room) {
    stop.max_tokens = *requested;
  } else if (clamp) {
    stop.max_tokens = room;
    stop.min_tokens = std::min(stop.min_tokens, room);  // shrunk with the room it needs
  } else {
    return Status(ErrorCode::kContextOverflow,
                  fmt::format("max_tokens: the prompt has {} tokens and max_tokens is {}; "
                              "together they exceed the maximum context of {} tokens",
                              prompt_tokens, *requested, max_context));
  }
  // E.g. /v1/completions' default max_tokens of 16 under a larger min_tokens.
  if (stop.max_tokens != kNoTokenLimit && stop.min_tokens > stop.max_tokens)
    return Status(
        ErrorCode::kInvalidArgument,
        fmt::format("min_tokens: {} must be <= max_tokens ({})", stop.min_tokens, stop.max_tokens));
  return Status::ok();
}

void RequestClock::on_token(ServerMetrics& metrics) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - last_).count();
  if (first_) {
    metrics.observe_time_to_first_token(s);
    first_ = false;
  } else {
    metrics.observe_inter_token_latency(s);
  }
  last_ = now;
}

void RequestClock::on_finish(ServerMetrics& metrics, const std::string& reason) {
  metrics.count_request(reason);
  metrics.observe_e2e_latency(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

Status submit_request(const std::shared_ptr<GenerationBackend>& backend, GenerationRequest request,
                      const std::shared_ptr<ResponseChannel>& channel, EventCallback on_event) {
  Result<RequestId> id = backend->submit(std::move(request), std::move(on_event));
  if (!id) return id.status();
  std::weak_ptr<GenerationBackend> weak = backend;
  const RequestId rid = *id;
  channel->set_canceller([weak, rid] {
    if (auto b = weak.lock()) (void)b->cancel(rid);  // kNotFound: it already finished
  });
  return Status::ok();
}

std::string random_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), uint32_t(rng()));
}

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

std::string sse_event(std::string_view json) {
  std::string out = "data: ";
  out += json;
  out += "\n\n";
  return out;
}

std::string sse_error(const Status& status) {
  const int code = status.code() == ErrorCode::kCancelled ? 503 : http_status_for(status.code());
  return sse_event(error_json(code, status.message()));
}

std::string finished_label(const GenerationEvent& event) {
  if (event.status.code() == ErrorCode::kCancelled) return "abort";
  if (!event.status.is_ok()) return "error";
  return event.finish == FinishReason::kLength ? "length" : "stop";
}

}  // namespace dsv41::server
