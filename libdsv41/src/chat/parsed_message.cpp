// Event folding and the whole-text parse (see parsed_message.hpp).
#include "chat/parsed_message.hpp"

#include <algorithm>

#include "core/json_writer.hpp"

namespace dsv41::chat {

void MessageAccumulator::apply(const ParseEvent& event) {
  switch (event.kind) {
    case ParseEvent::Kind::kReasoning:
      message_.reasoning_content += event.text;
      break;
    case ParseEvent::Kind::kContent:
      message_.content += event.text;
      break;
    case ParseEvent::Kind::kToolCallStart:
      message_.tool_calls.push_back({event.id, event.name, ""});
      break;
    case ParseEvent::Kind::kToolCallArguments:
      if (event.index >= 0 && static_cast<size_t>(event.index) < message_.tool_calls.size())
        message_.tool_calls[static_cast<size_t>(event.index)].arguments_json += event.text;
      break;
    case ParseEvent::Kind::kToolCallEnd:
    case ParseEvent::Kind::kFinish:
      break;
  }
}

ParsedMessage parse_completion(std::string_view text, const ParserOptions& options) {
  OutputParser parser(options);
  std::vector<ParseEvent> events;
  // In 4 KiB pieces, as a stream arrives: the parser erases and rescans its buffer per marker, so
  // one 400 KB feed of stray markers took 18 s (quadratic) where pieces take milliseconds.
  constexpr size_t kPiece = 4096;
  for (size_t at = 0; at < text.size(); at += kPiece)
    parser.feed(text.substr(at, std::min(kPiece, text.size() - at)), events);
  parser.finish(events);
  MessageAccumulator acc;
  acc.apply(events);
  ParsedMessage out = std::move(acc.message());
  out.warnings = parser.warnings();
  out.saw_eos = parser.saw_eos();
  return out;
}

std::string parsed_message_json(const ParsedMessage& message) {
  json::Writer w;
  w.begin_object();
  w.key("reasoning_content").value(message.reasoning_content);
  w.key("content").value(message.content);
  w.key("tool_calls").begin_array();
  for (const auto& call : message.tool_calls) {
    w.begin_object();
    w.key("id").value(call.id);
    w.key("type").value("function");
    w.key("function").begin_object();
    w.key("name").value(call.name);
    w.key("arguments").value(call.arguments_json);
    w.end_object();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

}  // namespace dsv41::chat
