// POST /v1/completions (api-and-clients.md §2.9): raw text in (no chat template; special-token
// strings in the prompt are parsed as tokens), text out. `prompt` is a string, a list with one
// string, or a list of token ids; max_tokens defaults to 16 (vLLM).
#include <fmt/format.h>

#include <memory>
#include <string>

#include "api/api.hpp"
#include "api/api_errors.hpp"
#include "api/generation_run.hpp"
#include "api/logprobs_json.hpp"
#include "api/response_format.hpp"
#include "chat/request_json.hpp"
#include "core/check.hpp"
#include "core/json_writer.hpp"

namespace dsv41::server {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// OpenAI / vLLM default for /v1/completions.
constexpr int64_t kDefaultMaxTokens = 16;

std::vector<int32_t> prompt_ids(element root, const GenerationBackend& backend,
                                std::string& prompt_text) {
  element p;
  DSV41_CHECK(!root.at_key("prompt").get(p) && !p.is_null(), kInvalidArgument, "prompt: missing");
  if (p.type() == element_type::ARRAY) {
    simdjson::dom::array list(p);
    DSV41_CHECK(list.size() >= 1, kInvalidArgument, "prompt: must not be an empty list");
    element first = list.at(0);
    // [[ids]]: a batch of one token list (lm-eval's local-completions sends loglikelihood
    // requests this way); more than one prompt per request is refused as for strings.
    std::string path = "prompt";
    if (first.type() == element_type::ARRAY) {
      DSV41_CHECK(list.size() == 1, kInvalidArgument,
                  "prompt: only one prompt per request is supported (got {})", list.size());
      list = simdjson::dom::array(first);
      DSV41_CHECK(list.size() >= 1, kInvalidArgument, "prompt[0]: must not be an empty list");
      first = list.at(0);
      path = "prompt[0]";
    }
    if (first.type() == element_type::STRING && path == "prompt") {
      DSV41_CHECK(list.size() == 1, kInvalidArgument,
                  "prompt: only one prompt per request is supported (got {})", list.size());
      p = first;
    } else {
      std::vector<int32_t> ids;
      size_t i = 0;
      for (element t : list) {
        DSV41_CHECK(
            t.type() == element_type::INT64 && int64_t(t) >= 0 && int64_t(t) < backend.vocab_size(),
            kInvalidArgument, "{}[{}]: expected a token id in [0, {})", path, i,
            backend.vocab_size());
        ids.push_back(static_cast<int32_t>(int64_t(t)));
        ++i;
      }
      Result<std::string> text = backend.detokenize(ids);
      if (text) prompt_text = *text;
      return ids;
    }
  }
  DSV41_CHECK(p.type() == element_type::STRING, kInvalidArgument,
              "prompt: expected a string or a list of token ids");
  prompt_text = std::string(std::string_view(p));
  DSV41_CHECK(!prompt_text.empty(), kInvalidArgument, "prompt: must not be empty");
  Result<std::vector<int32_t>> ids = backend.tokenize(prompt_text, /*special=*/true);
  if (!ids) DSV41_FAIL(kInvalidArgument, "prompt: {}", ids.status().message());
  return std::move(*ids);
}

class CompletionRun {
 public:
  // prompt_tokens: the prompt's length, so continuous usage counts it from the first chunk.
  // echo_ids: the prompt's tokens when echo comes with logprobs (their entries lead the list).
  CompletionRun(Api& api, std::shared_ptr<ResponseChannel> channel, const GenerationFields& f,
                std::string echo, int64_t prompt_tokens, const GenerationBackend* backend,
                std::vector<int32_t> echo_ids)
      : metrics_(api.metrics()),
        channel_(std::move(channel)),
        texts_(backend),
        id_(random_id("cmpl-")),
        model_(api.config().served_model_name),
        created_(unix_now()),
        stream_(f.stream),
        include_usage_(f.include_usage),
        continuous_usage_(f.continuous_usage),
        logprobs_(f.top_logprobs >= 0),
        with_top_(f.top_logprobs > 0),
        text_(std::move(echo)),
        echo_ids_(std::move(echo_ids)),
        prompt_(prompt_tokens) {
    // With logprobs the echo chunk waits for the prompt's log-probabilities (first event).
    if (stream_ && !text_.empty() && echo_ids_.empty()) push_chunk(text_, nullptr);
  }

  void on_event(const GenerationEvent& ev) {
    prompt_ = ev.prompt_tokens;
    cached_ = ev.cached_tokens;
    completion_ = ev.completion_tokens;
    if (ev.kind == GenerationEvent::Kind::kToken) {
      clock_.on_token(metrics_);
      if (!echo_ids_.empty()) echo_logprobs(ev);
      if (auto lp = logprobs_of(ev)) logprobs_pending_.push_back(std::move(*lp));
      emit(ev.text);
      return;
    }
    clock_.on_finish(metrics_, finished_label(ev));
    emit(ev.text);
    if (!ev.status.is_ok()) {
      if (channel_->cancelled()) return;
      if (stream_) {
        channel_->push(sse_error(ev.status));
        channel_->close();
      } else {
        channel_->complete(error_response(ev.status));
      }
      return;
    }
    const char* finish = finish_reason_name(ev.finish);
    if (stream_) {
      push_chunk("", finish);
      if (include_usage_) {
        json::Writer w;
        begin(w);
        w.key("choices").begin_array().end_array();
        usage(w);
        w.end_object();
        channel_->push(sse_event(w.str()));
      }
      channel_->push(std::string(kSseDone));
      channel_->close();
      return;
    }
    json::Writer w;
    begin(w);
    choices(w, text_, finish);
    usage(w);
    w.end_object();
    HttpResponse r;
    r.body = w.take();
    channel_->complete(std::move(r));
  }

 private:
  // The prompt's entries (the first token has none) from the first event, ahead of the
  // generated tokens'; a stream sends them with the echoed text.
  void echo_logprobs(const GenerationEvent& ev) {
    std::vector<TokenLogprobs> prompt;
    prompt.push_back({TokenLogprob{echo_ids_[0], 0.0f}, {}, true});
    for (size_t i = 0; i < ev.prompt_logprobs.size() && i + 1 < echo_ids_.size(); ++i)
      prompt.push_back({ev.prompt_logprobs[i].token, ev.prompt_logprobs[i].top, false});
    logprobs_pending_.insert(logprobs_pending_.begin(), prompt.begin(), prompt.end());
    echo_ids_.clear();
    if (stream_ && !text_.empty()) push_chunk(text_, nullptr);
  }

  void emit(const std::string& text) {
    if (text.empty()) return;
    if (stream_) {
      push_chunk(text, nullptr);
    } else {
      text_ += text;
    }
  }
  void begin(json::Writer& w) {
    w.begin_object().key("id").value(id_).key("object").value("text_completion");
    w.key("created").value(created_).key("model").value(model_);
  }
  void choices(json::Writer& w, const std::string& text, const char* finish) {
    w.key("choices").begin_array().begin_object();
    w.key("index").value(int64_t(0)).key("text").value(text).key("logprobs");
    if (logprobs_ && (!stream_ || !logprobs_pending_.empty())) {
      write_completion_logprobs(w, texts_, logprobs_pending_, with_top_, &text_offset_);
      logprobs_pending_.clear();
    } else {
      w.null();
    }
    w.key("finish_reason");
    finish ? w.value(finish) : w.null();
    w.end_object().end_array();
  }
  void usage(json::Writer& w) {
    w.key("usage").begin_object();
    w.key("prompt_tokens").value(prompt_).key("completion_tokens").value(completion_);
    w.key("total_tokens").value(prompt_ + completion_);
    w.key("prompt_tokens_details").begin_object().key("cached_tokens").value(cached_);
    w.end_object().end_object();
  }
  void push_chunk(const std::string& text, const char* finish) {
    json::Writer w;
    begin(w);
    choices(w, text, finish);
    if (continuous_usage_) usage(w);  // stream_options.continuous_usage_stats, as in chat
    w.end_object();
    channel_->push(sse_event(w.str()));
  }

  ServerMetrics& metrics_;
  std::shared_ptr<ResponseChannel> channel_;
  TokenTexts texts_;
  // Stream: the tokens not yet sent (a token whose text is held back goes with a later chunk);
  // else all of them.
  std::vector<TokenLogprobs> logprobs_pending_;
  int64_t text_offset_ = 0;
  RequestClock clock_;
  std::string id_, model_;
  int64_t created_;
  bool stream_, include_usage_, continuous_usage_, logprobs_, with_top_;
  std::string text_;
  std::vector<int32_t> echo_ids_;
  int64_t prompt_ = 0, cached_ = 0, completion_ = 0;
};

}  // namespace

HttpResponse handle_completions(Api& api, const HttpRequest& request) {
  std::shared_ptr<GenerationBackend> backend = api.backend();
  if (!backend) return error_response(503, api.unavailable_reason());
  if (api.shutting_down()) return error_response(503, "the server is shutting down");
  simdjson::dom::parser parser;
  element root = parse_body(parser, request.body);
  GenerationFields fields =
      parse_generation_fields(root, Endpoint::kCompletions, backend->vocab_size());
  if (auto bad_model = check_model(api, fields)) return *bad_model;
  std::string prompt_text;
  GenerationRequest gen;
  gen.prompt = prompt_ids(root, *backend, prompt_text);
  gen.sampling = fields.sampling;
  gen.stop = fields.stop;
  gen.top_logprobs = fields.top_logprobs;
  if (element rf; root["response_format"].get(rf) == simdjson::SUCCESS && !rf.is_null()) {
    chat::RequestOptions options;
    chat::parse_response_format(rf, options, "response_format");
    gen.constraint = json_output_constraint(*backend, options, -1);
  }
  const bool echo_logprobs = fields.echo && fields.top_logprobs >= 0;
  if (echo_logprobs) gen.prompt_logprobs = fields.top_logprobs;
  Status fit = fit_context("prompt", static_cast<int64_t>(gen.prompt.size()),
                           fields.max_tokens.value_or(kDefaultMaxTokens), backend->max_context(),
                           api.config().clamp_max_tokens, gen.stop);
  if (!fit.is_ok()) return error_response(fit);
  auto channel = std::make_shared<ResponseChannel>(
      fields.stream ? ResponseChannel::Mode::kEventStream : ResponseChannel::Mode::kDeferred);
  auto run = std::make_shared<CompletionRun>(api, channel, fields,
                                             fields.echo ? prompt_text : std::string(),
                                             static_cast<int64_t>(gen.prompt.size()), backend.get(),
                                             echo_logprobs ? gen.prompt : std::vector<int32_t>());
  Status s = submit_request(backend, std::move(gen), channel,
                            [run](const GenerationEvent& ev) { run->on_event(ev); });
  if (!s.is_ok()) return error_response(s);
  HttpResponse r;
  r.channel = channel;
  if (fields.stream) {
    r.content_type = "text/event-stream";
    r.headers.emplace_back("Cache-Control", "no-cache");
  }
  return r;
}

}  // namespace dsv41::server
