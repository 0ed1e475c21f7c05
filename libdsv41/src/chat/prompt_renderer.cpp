// Prompt rendering (see prompt_renderer.hpp). The passes mirror the reference encoder: image parts
// → placeholders, tool messages merged into user turns, tool results sorted by call order,
// thinking dropped before the last user turn, then one render per message.
#include "chat/prompt_renderer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "chat/dsml_writer.hpp"
#include "chat/markers.hpp"
#include "core/check.hpp"

namespace dsv41::chat {

namespace {

// A user-turn block after merging: text (images already placeholders) or a tool result, with the
// image parts whose placeholders its text holds (they move with it when tool results are sorted).
struct Block {
  bool is_tool_result = false;
  std::string text;
  std::string tool_call_id;
  std::vector<ImagePartRef> images;
};

// A message after the preprocessing passes; `source` is its index in the caller's list.
struct EncMessage {
  Role role = Role::kUser;
  size_t source = 0;
  const ChatMessage* message = nullptr;
  std::string content;                       // text content (list content joined by "\n\n")
  std::optional<std::vector<Block>> blocks;  // user turns only
  bool keep_reasoning = true;
  std::vector<ImagePartRef> images;  // non-user turns (user turns: in their blocks)
  std::optional<std::string> task;   // lost when the message is merged into the previous turn
};

std::string path_of(size_t index) { return fmt::format("messages[{}]", index); }

void reject_placeholder(std::string_view text, size_t index, std::string_view field) {
  DSV41_CHECK(text.find(markers::kImage) == std::string_view::npos, kInvalidArgument,
              "{}.{}: contains the image placeholder {}; send images as image_url parts",
              path_of(index), field, markers::kImage);
}

// Content → (text, user blocks, image urls). List content: text parts as given, each image part
// becomes the placeholder, other parts render as "[Unsupported <type>]" in user turns only.
EncMessage preprocess(const ChatMessage& m, size_t index) {
  EncMessage out;
  out.role = m.role;
  out.source = index;
  out.message = &m;
  out.task = m.task;
  if (m.reasoning_content) reject_placeholder(*m.reasoning_content, index, "reasoning_content");
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    reject_placeholder(m.tool_calls[k].name, index, fmt::format("tool_calls[{}].function.name", k));
    reject_placeholder(m.tool_calls[k].arguments_json, index,
                       fmt::format("tool_calls[{}].function.arguments", k));
  }
  if (m.text) {
    reject_placeholder(*m.text, index, "content");
    out.content = *m.text;
    if (m.role == Role::kUser) out.blocks = std::vector<Block>{{false, *m.text, {}}};
    return out;
  }
  if (!m.parts) {
    if (m.role == Role::kUser) out.blocks = std::vector<Block>{{false, "", {}}};
    return out;
  }
  std::vector<Block> blocks;
  std::string joined;
  bool first = true;
  for (size_t j = 0; j < m.parts->size(); ++j) {
    const ContentPart& part = (*m.parts)[j];
    Block block;
    if (part.kind == ContentPart::Kind::kText) {
      reject_placeholder(part.text, index, fmt::format("content[{}].text", j));
      block.text = part.text;
    } else if (part.kind == ContentPart::Kind::kImage) {
      block.text = std::string(markers::kImage);
      block.images.push_back({part.image_url, index, j});
      out.images.push_back(block.images.back());
    } else {
      blocks.push_back({false, fmt::format("[Unsupported {}]", part.type), {}, {}});
      continue;
    }
    joined += first ? "" : "\n\n";
    joined += block.text;
    first = false;
    blocks.push_back(std::move(block));
  }
  out.content = std::move(joined);
  if (m.role == Role::kUser) {
    out.blocks = std::move(blocks);
    out.images.clear();  // carried by the blocks
  }
  return out;
}

// Tool messages become tool-result blocks of a user turn; consecutive user turns (a user message
// after tool results, or two user messages) are merged into one.
std::vector<EncMessage> merge_tool_messages(std::vector<EncMessage> in) {
  std::vector<EncMessage> out;
  for (auto& m : in) {
    const bool after_user = !out.empty() && out.back().role == Role::kUser;
    if (m.role == Role::kTool) {
      Block block{true, m.content, m.message->tool_call_id, std::move(m.images)};
      m.images.clear();
      if (after_user) {
        out.back().blocks->push_back(std::move(block));
        continue;
      }
      m.role = Role::kUser;
      m.blocks = std::vector<Block>{std::move(block)};
      out.push_back(std::move(m));
    } else if (m.role == Role::kUser && after_user && !out.back().task) {
      auto& blocks = *out.back().blocks;
      blocks.insert(blocks.end(), m.blocks->begin(), m.blocks->end());
    } else {
      out.push_back(std::move(m));
    }
  }
  return out;
}

// Tool results of a turn follow the order of the preceding assistant's tool_calls ids (unknown
// ids sort as position 0; the sort is stable).
void sort_tool_results(std::vector<EncMessage>& messages) {
  std::map<std::string, size_t> order;
  for (auto& m : messages) {
    if (m.role == Role::kAssistant && !m.message->tool_calls.empty()) {
      order.clear();
      const auto& calls = m.message->tool_calls;
      for (size_t i = 0; i < calls.size(); ++i)
        if (!calls[i].id.empty()) order[calls[i].id] = i;
    } else if (m.role == Role::kUser && m.blocks && !order.empty()) {
      std::vector<Block> results;
      for (auto& b : *m.blocks)
        if (b.is_tool_result) results.push_back(b);
      if (results.size() < 2) continue;
      auto rank = [&](const Block& b) {
        auto it = order.find(b.tool_call_id);
        return it == order.end() ? size_t{0} : it->second;
      };
      std::stable_sort(results.begin(), results.end(),
                       [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
      size_t next = 0;
      for (auto& b : *m.blocks)
        if (b.is_tool_result) b = results[next++];
    }
  }
}

// Index of the last user / developer / later-system message, -1 if none.
int last_user_index(const std::vector<EncMessage>& messages) {
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i) {
    const Role r = messages[static_cast<size_t>(i)].role;
    if (r == Role::kUser || r == Role::kDeveloper || (r == Role::kSystem && i > 0)) return i;
  }
  return -1;
}

// drop_thinking in thinking mode without tools: before the last user turn, assistant reasoning
// is removed and developer messages are dropped (even a leading one).
std::vector<EncMessage> drop_thinking(std::vector<EncMessage> in) {
  const int last_user = last_user_index(in);
  std::vector<EncMessage> out;
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    EncMessage& m = in[static_cast<size_t>(i)];
    if (i >= last_user || m.role == Role::kUser || m.role == Role::kSystem ||
        m.role == Role::kLatestReminder) {
      out.push_back(std::move(m));
    } else if (m.role == Role::kAssistant) {
      m.keep_reasoning = false;
      out.push_back(std::move(m));
    }
  }
  return out;
}

void append_system_extras(std::string& out, const ChatMessage& m) {
  if (!m.tools.empty()) out += "\n\n" + render_tools_section(m.tools);
  if (m.response_format_json) {
    out +=
        "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
    out += *m.response_format_json;
  }
}

void render_user_blocks(std::string& out, const std::vector<Block>& blocks) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i) out += "\n\n";
    if (blocks[i].is_tool_result) {
      out += markers::kToolResultOpen;
      out += blocks[i].text;
      out += markers::kToolResultClose;
    } else {
      out += blocks[i].text;
    }
  }
}

// Task messages end with the task's special token; "action" first opens the assistant turn.
void append_task_marker(std::string& out, const std::string& task, bool thinking, size_t source) {
  static constexpr std::pair<std::string_view, std::string_view> kTasks[] = {
      {"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
      {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"}};
  for (const auto& [name, marker] : kTasks) {
    if (name != task) continue;
    if (name == "action") {
      out += markers::kAssistant;
      out += thinking ? markers::kThinkStart : markers::kThinkEnd;
    }
    out += marker;
    return;
  }
  DSV41_FAIL(kInvalidArgument,
             "{}.task: unknown task '{}' (expected action, query, authority, domain, title or "
             "read_url)",
             path_of(source), task);
}

struct RenderState {
  const std::vector<EncMessage>& messages;
  const EncoderOptions& options;
  bool drop = true;  // effective drop_thinking
  int last_user = -1;
};

void render_one(std::string& out, const RenderState& s, size_t index) {
  const EncMessage& m = s.messages[index];
  const ChatMessage& src = *m.message;
  const bool thinking = s.options.thinking;
  if (index == 0 && (thinking || m.role == Role::kSystem)) out += markers::kSystem;
  if (index == 0 && thinking) {
    fmt::format_to(std::back_inserter(out),
                   "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough "
                   "the reasoning)\n\n",
                   s.options.effort_budget);
  }
  switch (m.role) {
    case Role::kSystem:
      if (index > 0) out += markers::kSystem;
      out += m.content;
      append_system_extras(out, src);
      break;
    case Role::kDeveloper:
      DSV41_CHECK(!m.content.empty(), kInvalidArgument,
                  "{}.content: a developer message must have non-empty content", path_of(m.source));
      out += markers::kUser;
      out += m.content;
      append_system_extras(out, src);
      break;
    case Role::kUser:
      out += markers::kUser;
      render_user_blocks(out, *m.blocks);
      break;
    case Role::kLatestReminder:
      out += markers::kLatestReminder;
      out += m.content;
      break;
    case Role::kAssistant:
      // The answer to a task message carries no thinking part.
      if (thinking && !(index > 0 && s.messages[index - 1].task) &&
          (!s.drop || static_cast<int>(index) > s.last_user)) {
        if (m.keep_reasoning && src.reasoning_content) out += *src.reasoning_content;
        out += markers::kThinkEnd;
      }
      out += m.content;
      if (!src.tool_calls.empty()) append_tool_calls_block(out, src.tool_calls, path_of(m.source));
      out += markers::kEos;
      break;
    case Role::kTool:
      DSV41_FAIL(kInternal, "tool message survived merging");
  }
  // Generation header after a user turn that is last or followed by an assistant/reminder.
  if (index + 1 < s.messages.size()) {
    const Role next = s.messages[index + 1].role;
    if (next != Role::kAssistant && next != Role::kLatestReminder) return;
  }
  if (m.task) {
    append_task_marker(out, *m.task, thinking, m.source);
    return;
  }
  const bool user_turn =
      m.role == Role::kUser || m.role == Role::kDeveloper || (m.role == Role::kSystem && index > 0);
  if (!user_turn) return;
  out += markers::kAssistant;
  const bool open_think = thinking && (!s.drop || static_cast<int>(index) >= s.last_user);
  out += open_think ? markers::kThinkStart : markers::kThinkEnd;
}

}  // namespace

RenderedPrompt render_messages(const std::vector<ChatMessage>& messages,
                               const EncoderOptions& options, size_t source_shift) {
  DSV41_CHECK(!options.thinking || (options.effort_budget >= 1 && options.effort_budget <= 100),
              kInvalidArgument, "reasoning effort budget {} is outside [1, 100]",
              options.effort_budget);
  std::vector<EncMessage> enc;
  enc.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i)
    enc.push_back(preprocess(messages[i], i >= source_shift ? i - source_shift : 0));
  enc = merge_tool_messages(std::move(enc));
  sort_tool_results(enc);
  const bool any_tools = std::any_of(messages.begin(), messages.end(),
                                     [](const ChatMessage& m) { return !m.tools.empty(); });
  const bool drop = options.drop_thinking && !any_tools;
  if (options.thinking && drop) enc = drop_thinking(std::move(enc));

  RenderedPrompt out;
  out.text = markers::kBos;
  const RenderState state{enc, options, drop, last_user_index(enc)};
  for (size_t i = 0; i < enc.size(); ++i) {
    render_one(out.text, state, i);
    out.images.insert(out.images.end(), enc[i].images.begin(), enc[i].images.end());
    if (enc[i].blocks)
      for (const Block& b : *enc[i].blocks)
        out.images.insert(out.images.end(), b.images.begin(), b.images.end());
  }
  // Every placeholder is an image part's: one anywhere else (a tool schema, a response-format
  // schema) would bind the images to the wrong spans.
  size_t placeholders = 0;
  for (size_t at = out.text.find(markers::kImage); at != std::string::npos;
       at = out.text.find(markers::kImage, at + markers::kImage.size()))
    ++placeholders;
  DSV41_CHECK(placeholders == out.images.size(), kInvalidArgument,
              "the prompt holds {} image placeholders {} for {} image parts: a tool schema or "
              "response format contains the literal placeholder",
              placeholders, markers::kImage, out.images.size());
  return out;
}

std::vector<ChatMessage> to_encoder_messages(const ChatRequest& request, bool* inserted) {
  if (inserted) *inserted = false;
  std::vector<ChatMessage> out = request.messages;
  const auto& schema = request.options.response_format_schema_json;
  if (request.tools.empty() && !schema) return out;
  auto system = std::find_if(out.begin(), out.end(),
                             [](const ChatMessage& m) { return m.role == Role::kSystem; });
  if (system == out.end()) {
    ChatMessage empty;
    empty.role = Role::kSystem;
    empty.text = "";
    system = out.insert(out.begin(), std::move(empty));
    if (inserted) *inserted = true;
  }
  system->tools.insert(system->tools.end(), request.tools.begin(), request.tools.end());
  if (schema) system->response_format_json = *schema;
  return out;
}

EncoderOptions encoder_options(const ResolvedOptions& resolved) {
  return {resolved.thinking, resolved.thinking ? resolved.effort_budget : 75,
          resolved.drop_thinking};
}

Result<RenderedPrompt> render_request(const ChatRequest& request, const ResolvedOptions& resolved) {
  std::optional<RenderedPrompt> out;
  Status st = detail::capture_status([&] {
    if (resolved.tool_choice == ToolChoiceKind::kNamed) {
      const bool known =
          std::any_of(request.tools.begin(), request.tools.end(),
                      [&](const auto& t) { return t.name == resolved.tool_choice_name; });
      DSV41_CHECK(known, kInvalidArgument,
                  "tool_choice.function.name: '{}' is not one of the request's tools",
                  resolved.tool_choice_name);
    }
    bool inserted = false;
    const std::vector<ChatMessage> messages = to_encoder_messages(request, &inserted);
    out = render_messages(messages, encoder_options(resolved), inserted ? 1 : 0);
  });
  if (!st.is_ok()) return st;
  return std::move(*out);
}

}  // namespace dsv41::chat
