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

struct RenderedPrompt {
  std::string text;
  // URLs of the image parts, in the order of their <｜deepseek_image｜> placeholders.
  std::vector<std::string> image_urls;
};

// Renders encoder-level messages (tools / response_format already attached to messages).
// Throws kInvalidArgument naming the message (index in `messages`) and field.
RenderedPrompt render_messages(const std::vector<ChatMessage>& messages,
                               const EncoderOptions& options);

// Request → encoder messages (golden/chat/README.md mapping): request tools and the response-
// format schema go on the FIRST system message wherever it sits; without one, an empty system
// message is inserted at index 0.
std::vector<ChatMessage> to_encoder_messages(const ChatRequest& request);

EncoderOptions encoder_options(const ResolvedOptions& resolved);

// The whole request path: validates a named tool_choice against the tools, maps, renders.
Result<RenderedPrompt> render_request(const ChatRequest& request, const ResolvedOptions& resolved);

}  // namespace dsv41::chat
