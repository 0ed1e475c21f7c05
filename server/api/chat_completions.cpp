// POST /v1/chat/completions (api-and-clients.md §2.3–2.8): request → chat layer (parse, resolve
// options once, render) → tokens → engine; the engine's text stream goes through the chat
// OutputParser into reasoning / content / tool-call deltas (stream, §2.5–2.6) or one message
// (non-stream, §2.4). Both paths share the parser (§3.6).
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <string>

#include "api/api.hpp"
#include "api/api_errors.hpp"
#include "api/generation_run.hpp"
#include "api/image_input.hpp"
#include "api/logprobs_json.hpp"
#include "api/response_format.hpp"
#include "api/tool_choice.hpp"
#include "chat/output_parser.hpp"
#include "chat/parsed_message.hpp"
#include "chat/prompt_renderer.hpp"
#include "chat/request_json.hpp"
#include "core/check.hpp"
#include "core/json_writer.hpp"
#include "dsv41/image.hpp"

namespace dsv41::server {

namespace {

using DeltaFn = std::function<void(json::Writer&)>;

struct Counts {
  int64_t prompt = 0, cached = 0, completion = 0;
};

void write_usage(json::Writer& w, const Counts& c) {
  w.key("usage").begin_object();
  w.key("prompt_tokens").value(c.prompt);
  w.key("completion_tokens").value(c.completion);
  w.key("total_tokens").value(c.prompt + c.completion);
  w.key("prompt_tokens_details").begin_object().key("cached_tokens").value(c.cached).end_object();
  w.end_object();
}

// One request's streaming state. Touched only from the backend's callback thread.
class ChatRun {
 public:
  ChatRun(Api& api, std::shared_ptr<ResponseChannel> channel, const GenerationFields& fields,
          const chat::ResolvedOptions& resolved, const GenerationBackend* backend)
      : metrics_(api.metrics()),
        channel_(std::move(channel)),
        parser_(chat::ParserOptions{resolved.thinking, std::nullopt}),
        texts_(backend),
        id_(random_id("chatcmpl-")),
        model_(api.config().served_model_name),
        reasoning_field_(api.config().reasoning_field),
        created_(unix_now()),
        stream_(fields.stream),
        include_usage_(fields.include_usage),
        continuous_usage_(fields.continuous_usage),
        include_reasoning_(resolved.include_reasoning),
        logprobs_(fields.top_logprobs >= 0),
        single_call_(!fields.parallel_tool_calls) {}

  // prompt_tokens: the rendered prompt's length, so the role chunk's continuous usage already
  // counts it (vLLM's first chunk does; it read 0 before the first engine event).
  void start(int64_t prompt_tokens) {
    counts_.prompt = prompt_tokens;
    if (stream_)
      push_chunk([](json::Writer& w) { w.key("role").value("assistant").key("content").value(""); },
                 nullptr);
  }

  void on_event(const GenerationEvent& ev) {
    counts_ = {ev.prompt_tokens, ev.cached_tokens, ev.completion_tokens};
    std::vector<chat::ParseEvent> events;
    if (ev.kind == GenerationEvent::Kind::kToken) {
      clock_.on_token(metrics_);
      // Every generated token's entry, reasoning and tool-call markup included (vLLM's too);
      // a stream sends it with the next chunk, which may be later than the token's own text.
      if (auto lp = logprobs_of(ev)) logprobs_pending_.push_back(std::move(*lp));
      parser_.feed(ev.text, events);
      deliver(events);
      return;
    }
    clock_.on_finish(metrics_, finished_label(ev));
    if (!ev.text.empty()) parser_.feed(ev.text, events);
    parser_.finish(events);
    deliver(events);
    if (!ev.status.is_ok()) return fail(ev.status);
    // A call cut off by max_tokens, a stop string or a stop token is "length" / "stop", not
    // "tool_calls": clients execute tool_calls (Pi would run a truncated edit), and its arguments
    // were closed by the parser, not the model.
    // (With parallel_tool_calls false only a cut first call counts: later ones were dropped.)
    const bool cut_call =
        parser_.closed_an_open_call() && !(single_call_ && parser_.tool_call_count() > 1);
    const char* finish = any_tool_call_ && !cut_call ? "tool_calls" : finish_reason_name(ev.finish);
    if (stream_) {
      push_chunk([](json::Writer&) {}, finish);
      if (include_usage_) channel_->push(sse_event(usage_chunk()));
      channel_->push(std::string(kSseDone));
      channel_->close();
    } else {
      HttpResponse r;
      r.body = message_json(finish);
      channel_->complete(std::move(r));
    }
  }

 private:
  void fail(const Status& status) {
    if (channel_->cancelled()) return;  // the client is gone: nobody to tell
    if (stream_) {
      channel_->push(sse_error(status));
      channel_->close();
    } else {
      channel_->complete(error_response(status.code() == ErrorCode::kCancelled
                                            ? Status(ErrorCode::kAborted, status.message())
                                            : status));
    }
  }

  void deliver(const std::vector<chat::ParseEvent>& events) {
    using K = chat::ParseEvent::Kind;
    for (const chat::ParseEvent& e : events) {
      const bool call_event = e.kind == K::kToolCallStart || e.kind == K::kToolCallArguments ||
                              e.kind == K::kToolCallEnd;
      if (call_event && single_call_ && e.index >= 1) continue;
      if (e.kind == K::kToolCallStart) any_tool_call_ = true;
      if (e.kind == K::kReasoning && !include_reasoning_) continue;
      if (!stream_) {
        acc_.apply(e);
        continue;
      }
      switch (e.kind) {
        case K::kReasoning:
          push_chunk([&](json::Writer& w) { w.key(reasoning_field_).value(e.text); }, nullptr);
          break;
        case K::kContent:
          push_chunk([&](json::Writer& w) { w.key("content").value(e.text); }, nullptr);
          break;
        case K::kToolCallStart:
          // First fragment of call i: id, type and name present (the AI SDK requires them).
          push_chunk(
              [&](json::Writer& w) {
                w.key("tool_calls").begin_array().begin_object();
                w.key("index").value(int64_t(e.index)).key("id").value(e.id);
                w.key("type").value("function");
                w.key("function").begin_object().key("name").value(e.name);
                w.key("arguments").value("").end_object();
                w.end_object().end_array();
              },
              nullptr);
          break;
        case K::kToolCallArguments:
          // Continuations omit id/type/name entirely, never null (§2.6).
          push_chunk(
              [&](json::Writer& w) {
                w.key("tool_calls").begin_array().begin_object();
                w.key("index").value(int64_t(e.index));
                w.key("function").begin_object().key("arguments").value(e.text).end_object();
                w.end_object().end_array();
              },
              nullptr);
          break;
        case K::kToolCallEnd:
        case K::kFinish:
          break;
      }
    }
  }

  void begin(json::Writer& w, const char* object) {
    w.begin_object();
    w.key("id").value(id_).key("object").value(object);
    w.key("created").value(created_).key("model").value(model_);
  }

  void push_chunk(const DeltaFn& delta, const char* finish) {
    json::Writer w;
    begin(w, "chat.completion.chunk");
    w.key("choices").begin_array().begin_object();
    w.key("index").value(int64_t(0));
    w.key("delta").begin_object();
    delta(w);
    w.end_object();
    w.key("logprobs");
    if (logprobs_pending_.empty()) {
      w.null();
    } else {
      write_chat_logprobs(w, texts_, logprobs_pending_);
      logprobs_pending_.clear();
    }
    w.key("finish_reason");
    finish ? w.value(finish) : w.null();
    w.end_object().end_array();
    if (continuous_usage_) write_usage(w, counts_);
    w.end_object();
    channel_->push(sse_event(w.str()));
  }

  std::string usage_chunk() {
    json::Writer w;
    begin(w, "chat.completion.chunk");
    w.key("choices").begin_array().end_array();
    write_usage(w, counts_);
    w.end_object();
    return w.take();
  }

  std::string message_json(const char* finish) {
    chat::ParsedMessage& m = acc_.message();
    if (!m.tool_calls.empty()) {
      while (!m.content.empty() && (m.content.back() == '\n' || m.content.back() == ' '))
        m.content.pop_back();
    }
    json::Writer w;
    begin(w, "chat.completion");
    w.key("choices").begin_array().begin_object();
    w.key("index").value(int64_t(0));
    w.key("message").begin_object().key("role").value("assistant");
    w.key("content");
    (m.content.empty() && !m.tool_calls.empty()) ? w.null() : w.value(m.content);
    w.key(reasoning_field_);
    m.reasoning_content.empty() ? w.null() : w.value(m.reasoning_content);
    if (!m.tool_calls.empty()) {
      w.key("tool_calls").begin_array();
      for (const chat::ParsedToolCall& c : m.tool_calls) {
        w.begin_object().key("id").value(c.id).key("type").value("function");
        w.key("function").begin_object().key("name").value(c.name);
        w.key("arguments").value(c.arguments_json).end_object().end_object();
      }
      w.end_array();
    }
    w.end_object();
    w.key("logprobs");
    logprobs_ ? write_chat_logprobs(w, texts_, logprobs_pending_) : (void)w.null();
    w.key("finish_reason").value(finish).key("stop_reason").null();
    w.end_object().end_array();
    write_usage(w, counts_);
    w.end_object();
    return w.take();
  }

  ServerMetrics& metrics_;
  std::shared_ptr<ResponseChannel> channel_;
  chat::OutputParser parser_;
  chat::MessageAccumulator acc_;
  TokenTexts texts_;
  std::vector<TokenLogprobs> logprobs_pending_;  // stream: not yet sent; else: all
  RequestClock clock_;
  std::string id_, model_, reasoning_field_;
  int64_t created_;
  bool stream_, include_usage_, continuous_usage_, include_reasoning_, logprobs_;
  bool single_call_;  // parallel_tool_calls false: calls after the first are dropped
  bool any_tool_call_ = false;
  Counts counts_;
};

// One image part, decoded, with the positions its span will take.
struct PromptPicture {
  DecodedImage pixels;
  int64_t positions = 0;
};

// The rendered prompt's image parts in placeholder order (RenderedPrompt::images: tool results
// sorted, dropped turns' parts absent): checked from their headers (the pixel limit before any
// decoding), refused at once when the model cannot use images, decoded, and sized. The vision
// tower runs later, on the image worker (encode_and_submit). Throws detail::Failure naming the
// part.
std::vector<PromptPicture> decode_images(const std::vector<chat::ImagePartRef>& parts,
                                         const GenerationBackend& backend, int64_t max_pixels) {
  std::vector<PromptPicture> out;
  for (const chat::ImagePartRef& part : parts) {
    const std::string field =
        fmt::format("messages[{}].content[{}].image_url", part.message, part.part);
    ImageInfo info;
    Result<std::string> bytes = image_url_bytes(part.url, max_pixels, &info);
    if (!bytes) DSV41_FAIL(kInvalidArgument, "{}: {}", field, bytes.status().message());
    const Status support = backend.image_support();
    if (!support.is_ok())
      DSV41_FAIL(kUnsupported, "{}: image input ({} {}x{}) cannot be used: {}", field, info.format,
                 info.width, info.height, support.message());
    const auto* data = reinterpret_cast<const uint8_t*>(bytes->data());
    Result<DecodedImage> rgb =
        decode_image(std::span<const uint8_t>(data, bytes->size()), max_pixels);
    if (!rgb)
      detail::fail(rgb.status().code(), field + ": " + rgb.status().message(), __FILE__, __LINE__);
    Result<int64_t> positions = backend.image_positions(rgb->width, rgb->height);
    if (!positions)
      detail::fail(positions.status().code(), field + ": " + positions.status().message(), __FILE__,
                   __LINE__);
    out.push_back(PromptPicture{std::move(rgb).value(), *positions});
  }
  return out;
}

// Each image placeholder of the prompt becomes its span (spec §7.4 step 3), recorded in gen.images
// with the embedding still to come (encode_and_submit). The renderer refuses a literal
// placeholder anywhere but an image part, so the placeholders are exactly its images, in order.
void expand_images(const std::vector<PromptPicture>& pictures, int32_t image_id,
                   GenerationRequest& gen) {
  if (pictures.empty()) return;
  std::vector<int64_t> positions;
  for (const PromptPicture& p : pictures) positions.push_back(p.positions);
  Result<std::vector<int64_t>> offsets = expand_image_placeholders(gen.prompt, image_id, positions);
  if (!offsets) detail::fail(ErrorCode::kInternal, offsets.status().message(), __FILE__, __LINE__);
  for (int64_t offset : *offsets) gen.images.push_back(PromptImage{offset, nullptr});
}

// A chat request whose images still need the vision tower: run it on the image worker, then
// submit. Failures reach the client through the run (an SSE error event, or the deferred
// response), as an engine failure would.
struct PendingImages {
  std::shared_ptr<GenerationBackend> backend;
  std::shared_ptr<ResponseChannel> channel;
  std::shared_ptr<ChatRun> run;
  GenerationRequest gen;
  std::vector<PromptPicture> pictures;
  ImageCache* cache;  // the Api's; outlives the worker that runs this

  void fail(Status status) {
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kFinished;
    ev.status = std::move(status);
    ev.prompt_tokens = static_cast<int64_t>(gen.prompt.size());
    run->on_event(ev);
  }
  void encode_and_submit() {
    if (channel->cancelled()) return;  // the client left while the request waited
    for (size_t i = 0; i < pictures.size(); ++i) {
      const ImagePixels pixels = pictures[i].pixels.pixels();
      const ImageCache::Key key = ImageCache::key_of(pixels);
      if (auto hit = cache->find(key)) {
        gen.images[i].image = std::move(hit);
        continue;
      }
      Result<ImageEmbedding> e = backend->encode_image(pixels);
      if (!e) return fail(e.status());
      gen.images[i].image = std::make_shared<const ImageEmbedding>(std::move(e).value());
      cache->insert(key, gen.images[i].image);
    }
    auto r = run;
    Status s = submit_request(backend, std::move(gen), channel,
                              [r](const GenerationEvent& ev) { r->on_event(ev); });
    if (!s.is_ok()) fail(s);
  }
};

}  // namespace

HttpResponse handle_chat_completions(Api& api, const HttpRequest& request) {
  std::shared_ptr<GenerationBackend> backend = api.backend();
  if (!backend) return error_response(503, api.unavailable_reason());
  if (api.shutting_down()) return error_response(503, "the server is shutting down");
  simdjson::dom::parser parser;
  simdjson::dom::element root = parse_body(parser, request.body);
  GenerationFields fields = parse_generation_fields(root, Endpoint::kChat, backend->vocab_size());
  if (auto bad_model = check_model(api, fields)) return *bad_model;
  chat::ChatRequest chat_request = chat::parse_chat_request(root);
  DSV41_CHECK(!chat_request.messages.empty(), kInvalidArgument, "messages: must not be empty");
  // A leading developer message is the system prompt (api-and-clients.md §3.2): the release
  // encoder renders developer as a user turn and drops it with the thinking history, which
  // silently lost Pi's system prompt (Pi sends it as developer when reasoning is on).
  if (chat_request.messages.front().role == chat::Role::kDeveloper)
    chat_request.messages.front().role = chat::Role::kSystem;
  chat::ResolvedOptions resolved = chat::resolve_options(
      chat_request.options, !chat_request.tools.empty(), chat::EffortTable::release());
  // tool_choice none: the model is not shown the tools, so it has none to call.
  if (resolved.tool_choice == chat::ToolChoiceKind::kNone) chat_request.tools.clear();
  Result<chat::RenderedPrompt> prompt = chat::render_request(chat_request, resolved);
  if (!prompt) return error_response(prompt.status());
  std::vector<PromptPicture> pictures =
      decode_images(prompt->images, *backend, api.config().max_image_pixels);
  Result<std::vector<int32_t>> ids = backend->tokenize(prompt->text, /*special=*/true);
  if (!ids) return error_response(ids.status(), "messages");

  GenerationRequest gen;
  gen.prompt = std::move(*ids);
  expand_images(pictures, backend->image_token_id(), gen);
  gen.sampling = fields.sampling;
  gen.stop = fields.stop;
  gen.constraint = tool_choice_constraint(*backend, chat_request, resolved);
  if (!gen.constraint)
    gen.constraint = response_format_constraint(*backend, chat_request, resolved);
  gen.top_logprobs = fields.top_logprobs;
  Status fit = fit_context("messages", static_cast<int64_t>(gen.prompt.size()), fields.max_tokens,
                           backend->max_context(), api.config().clamp_max_tokens, gen.stop);
  if (!fit.is_ok()) return error_response(fit);

  auto channel = std::make_shared<ResponseChannel>(
      fields.stream ? ResponseChannel::Mode::kEventStream : ResponseChannel::Mode::kDeferred);
  auto run = std::make_shared<ChatRun>(api, channel, fields, resolved, backend.get());
  if (!pictures.empty()) {
    // The vision tower can take minutes on the CPU: not on this I/O thread.
    auto pending = std::make_shared<PendingImages>(PendingImages{
        backend, channel, run, std::move(gen), std::move(pictures), &api.image_cache()});
    // The role chunk goes out before the worker can deliver anything.
    run->start(static_cast<int64_t>(pending->gen.prompt.size()));
    const bool queued = api.image_worker().post(
        {[pending] { pending->encode_and_submit(); },
         [pending] { pending->fail(Status(ErrorCode::kAborted, "the server is shutting down")); }});
    if (!queued) return error_response(503, "the server is shutting down");
  } else {
    run->start(static_cast<int64_t>(gen.prompt.size()));
    Status s = submit_request(backend, std::move(gen), channel,
                              [run](const GenerationEvent& ev) { run->on_event(ev); });
    if (!s.is_ok()) return error_response(s);
  }
  HttpResponse r;
  r.channel = channel;
  if (fields.stream) {
    r.content_type = "text/event-stream";
    r.headers.emplace_back("Cache-Control", "no-cache");
  }
  return r;
}

}  // namespace dsv41::server
