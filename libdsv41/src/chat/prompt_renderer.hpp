// DeepSeek-V4.1 prompt rendering: a pure function of (messages, options) → prompt text, byte-
// identical to the release reference encoder `encode_messages` (golden/chat/render_cases.jsonl;
// api-and-clients.md §3.2, model-architecture.md §8.3).
#pragma once

#include <string>
#include <vector>

#include "chat/messages.hpp"
#include "chat/options.hpp"
#include "chat/request_json.hpp"
#include "dsv41/status.hpp"

namespace dsv41::chat {

// Encoder-level options: thinking mode, the already-validated effort budget (1..100, only read in
// thinking mode), and drop_thinking (reasoning of turns before the last user turn is dropped,
// unless any message carries tools).
struct EncoderOptions {
  bool thinking = true;
  int effort_budget = 75;
  bool drop_thinking = true;
};

// One image part of the messages: its URL and where it sits ("messages[m].content[p]").
struct ImagePartRef {
  std::string url;
  size_t message = 0;
  size_t part = 0;
};

struct RenderedPrompt {
  std::string text;
  // The image parts in the order of their <｜deepseek_image｜> placeholders in `text`: tool results
  // re-ordered with their blocks, parts of dropped messages (developer turns under drop_thinking)
  // absent. Images are bound to placeholders by this order, not the request's.
  std::vector<ImagePartRef> images;
};

// Renders encoder-level messages (tools / response_format already attached to messages).
// Throws kInvalidArgument naming the message and field; messages[i] is named messages[i -
// source_shift] (to_encoder_messages' inserted system message shifts the rest by one), and a
// literal placeholder anywhere else in the prompt (tool schemas, tool-call arguments) is refused.
RenderedPrompt render_messages(const std::vector<ChatMessage>& messages,
                               const EncoderOptions& options, size_t source_shift = 0);

// Request → encoder messages (golden/chat/README.md mapping): request tools and the response-
// format schema go on the FIRST system message wherever it sits; without one, an empty system
// message is inserted at index 0 (*inserted, when given, says so).
std::vector<ChatMessage> to_encoder_messages(const ChatRequest& request, bool* inserted = nullptr);

EncoderOptions encoder_options(const ResolvedOptions& resolved);

// The whole request path: validates a named tool_choice against the tools, maps, renders.
Result<RenderedPrompt> render_request(const ChatRequest& request, const ResolvedOptions& resolved);

}  // namespace dsv41::chat
