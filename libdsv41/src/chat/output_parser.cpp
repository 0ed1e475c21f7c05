// Streaming output parser (see output_parser.hpp). States: kReasoning / kContent (free text),
// kBlock (inside a calls block), kInvoke (inside an invoke), kParam (inside a parameter value),
// kDone (after the end-of-sentence marker; later text is dropped).
#include "chat/output_parser.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "chat/dsml_tag.hpp"
#include "chat/markers.hpp"
#include "core/json_writer.hpp"

namespace dsv41::chat {

namespace {

using markers::kDsmlTagClose;
using markers::kDsmlTagOpen;
using markers::kEos;

// The longest legitimate tag is a parameter tag with its name; anything longer that has not seen
// '>' is not a tag, so its anchor is treated as junk instead of holding the stream back forever.
constexpr size_t kMaxTagBytes = 1024;

constexpr std::string_view kBlankDsml = "\n\n<｜DSML｜";
constexpr std::string_view kNewlineDsml = "\n<｜DSML｜";

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Up to two newlines right before `pos` are the blank-line separator of a tool-call block.
size_t strip_separator(std::string_view text, size_t pos) {
  size_t n = pos;
  for (int i = 0; i < 2 && n > 0 && text[n - 1] == '\n'; ++i) --n;
  return n;
}

bool is_valid_json(const std::string& text) {
  simdjson::dom::parser parser;
  // Integers beyond 64 bits (valid for Python's json) fail here with NUMBER_ERROR and are then
  // sent as strings: an accepted deviation, documented in docs/chat.md.
  return !parser.parse(text).error();
}

}  // namespace

OutputParser::OutputParser(const ParserOptions& options)
    : options_(options),
      rng_(options.seed ? *options.seed : std::random_device{}()),
      state_(options.thinking ? State::kReasoning : State::kContent) {}

void OutputParser::feed(std::string_view chunk, std::vector<ParseEvent>& events) {
  if (finished_) return;
  out_ = &events;
  merge_floor_ = events.size();
  buf_.append(chunk);
  process(false);
  out_ = nullptr;
}

void OutputParser::finish(std::vector<ParseEvent>& events) {
  if (finished_) return;
  out_ = &events;
  merge_floor_ = events.size();
  process(true);
  closed_open_call_ = state_ == State::kParam || state_ == State::kInvoke;
  if (state_ == State::kParam) {
    warn("output ended inside a parameter value");
    end_param();
    state_ = State::kInvoke;
  }
  if (state_ == State::kInvoke) {
    warn("output ended inside an invoke (no </｜DSML｜ invoke>)");
    end_call();
    state_ = State::kBlock;
  }
  if (state_ == State::kBlock) warn("output ended inside a calls block (no </｜DSML｜ calls>)");
  if (options_.thinking && !saw_think_end_) warn("missing </think>: reasoning never ended");
  emit(ParseEvent::Kind::kFinish, "");
  finished_ = true;
  out_ = nullptr;
}

void OutputParser::process(bool final) {
  while (true) {
    bool progressed = false;
    switch (state_) {
      case State::kReasoning:
      case State::kContent:
        progressed = step_text(final);
        break;
      case State::kBlock:
      case State::kInvoke:
        progressed = step_structure(final);
        break;
      case State::kParam:
        progressed = step_param(final);
        break;
      case State::kDone:
        if (buf_.find_first_not_of(" \t\r\n") != std::string::npos)
          warn("text after the end-of-sentence marker dropped");
        buf_.clear();
        return;
    }
    if (!progressed) return;
  }
}

bool OutputParser::step_text(bool final) {
  const MarkerHit hit = find_first_marker(
      buf_, {markers::kThinkEnd, markers::kThinkStart, kEos, kDsmlTagOpen, kDsmlTagClose});
  if (hit.pos == std::string::npos) {
    size_t n = buf_.size();
    if (!final) {
      n -= partial_marker_suffix(buf_, {markers::kThinkEnd, markers::kThinkStart, kEos, kBlankDsml,
                                        kNewlineDsml, kDsmlTagOpen, kDsmlTagClose});
      n = utf8_complete_prefix(std::string_view(buf_).substr(0, n));
    }
    emit_text(std::string_view(buf_).substr(0, n));
    buf_.erase(0, n);
    return false;
  }
  const size_t p = hit.pos;
  if (hit.marker == kDsmlTagOpen || hit.marker == kDsmlTagClose) {
    const size_t q = buf_.find('>', p);
    // Another marker before the anchor's '>' (a </think>, the end-of-sentence marker, a real
    // tag): the anchor is stray text and that '>' is not its own. Only the anchor is dropped
    // ("I will use <｜DSML｜ now</think>..." took the </think> and put the answer in reasoning).
    const MarkerHit next = find_first_marker(
        buf_, {markers::kThinkEnd, markers::kThinkStart, kEos, kDsmlTagOpen, kDsmlTagClose},
        p + hit.marker.size());
    if (next.pos != std::string::npos && (q == std::string::npos || next.pos < q)) {
      warn("stray DSML anchor dropped");
      buf_.erase(p, hit.marker.size());
      return true;
    }
    if (q == std::string::npos || q - p > kMaxTagBytes) {
      if (!final && q == std::string::npos && buf_.size() - p <= kMaxTagBytes) {
        const size_t n = strip_separator(buf_, p);
        emit_text(std::string_view(buf_).substr(0, n));
        buf_.erase(0, n);
        return false;
      }
      warn("incomplete DSML tag dropped");
      if (final) {
        emit_text(std::string_view(buf_).substr(0, p));
        buf_.clear();
      } else {
        buf_.erase(p, hit.marker.size());  // rescanned: the splice may form a marker
      }
      return true;
    }
    const std::string tag = buf_.substr(p, q + 1 - p);
    const DsmlTag t = classify_dsml_tag(tag);
    if (!t.closing && (t.kind == DsmlTag::Kind::kCalls || t.kind == DsmlTag::Kind::kInvoke)) {
      emit_text(std::string_view(buf_).substr(0, strip_separator(buf_, p)));
      if (state_ == State::kReasoning) warn("tool-call block inside reasoning (before </think>)");
      if (t.kind == DsmlTag::Kind::kInvoke) {
        warn("invoke outside a calls block");
        buf_.erase(0, p);  // step_structure reads the invoke tag
      } else {
        buf_.erase(0, q + 1);
      }
      state_ = State::kBlock;
      return true;
    }
    // Dropped in place and rescanned: the text on both sides may join into a marker.
    warn(fmt::format("stray DSML tag dropped: {}", tag));
    buf_.erase(p, q + 1 - p);
    return true;
  }
  const bool stray = (hit.marker == markers::kThinkEnd && state_ == State::kContent) ||
                     (hit.marker == markers::kThinkStart && state_ == State::kReasoning);
  if (stray) {
    warn(hit.marker == markers::kThinkEnd ? "stray </think> in content dropped"
                                          : "repeated <think> dropped");
    buf_.erase(p, hit.marker.size());
    return true;
  }
  emit_text(std::string_view(buf_).substr(0, p));
  buf_.erase(0, p + hit.marker.size());
  if (hit.marker == kEos) {
    saw_eos_ = true;
    state_ = State::kDone;
  } else if (hit.marker == markers::kThinkEnd) {
    saw_think_end_ = true;
    state_ = State::kContent;
  } else {
    warn("<think> in content: the text after it is reasoning");
    state_ = State::kReasoning;
  }
  return true;
}

OutputParser::TagRead OutputParser::take_tag(bool final, std::string& tag) {
  const size_t q = buf_.find('>');
  if (q != std::string::npos && q <= kMaxTagBytes) {
    tag = buf_.substr(0, q + 1);
    buf_.erase(0, q + 1);
    return TagRead::kTag;
  }
  if (!final && q == std::string::npos && buf_.size() <= kMaxTagBytes) return TagRead::kNeedMore;
  warn("incomplete DSML tag dropped");
  buf_.erase(0, final ? buf_.size() : 1);
  return TagRead::kDropped;
}

bool OutputParser::step_structure(bool final) {
  const size_t start = buf_.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) {
    buf_.clear();
    return false;
  }
  buf_.erase(0, start);
  if (starts_with(buf_, kEos)) {
    buf_.erase(0, kEos.size());
    saw_eos_ = true;
    warn("end-of-sentence inside a tool-call block");
    if (state_ == State::kInvoke) end_call();
    state_ = State::kDone;
    return true;
  }
  if (starts_with(buf_, kDsmlTagOpen) || starts_with(buf_, kDsmlTagClose)) {
    std::string tag;
    const TagRead read = take_tag(final, tag);
    if (read == TagRead::kNeedMore) return false;
    if (read == TagRead::kTag) handle_structure_tag(tag);
    return true;
  }
  if (!final && partial_marker_suffix(buf_, {kDsmlTagOpen, kDsmlTagClose, kEos}) == buf_.size())
    return false;
  size_t next = buf_.find('<', 1);
  if (next == std::string::npos) next = buf_.size();
  warn("text inside a tool-call block dropped");
  buf_.erase(0, next);
  return true;
}

void OutputParser::handle_structure_tag(const std::string& tag) {
  const DsmlTag t = classify_dsml_tag(tag);
  using Kind = DsmlTag::Kind;
  if (state_ == State::kBlock) {
    if (t.kind == Kind::kInvoke && !t.closing) {
      start_call(t.name, t.has_name);
      state_ = State::kInvoke;
    } else if (t.kind == Kind::kCalls && t.closing) {
      state_ = State::kContent;
    } else {
      warn(fmt::format("unexpected DSML tag in a calls block dropped: {}", tag));
    }
    return;
  }
  if (t.kind == Kind::kParameter && !t.closing) {
    start_param(t.name, t.string_flag, t.has_name);
    state_ = State::kParam;
  } else if (t.kind == Kind::kInvoke && t.closing) {
    end_call();
    state_ = State::kBlock;
  } else if (t.kind == Kind::kCalls && t.closing) {
    warn("calls block closed inside an invoke");
    end_call();
    state_ = State::kContent;
  } else if (t.kind == Kind::kInvoke) {
    warn("invoke opened inside an invoke");
    end_call();
    start_call(t.name, t.has_name);
  } else {
    warn(fmt::format("unexpected DSML tag in an invoke dropped: {}", tag));
  }
}

bool OutputParser::step_param(bool final) {
  size_t from = 0;
  while (true) {
    const MarkerHit hit = find_first_marker(buf_, {kDsmlTagOpen, kDsmlTagClose, kEos}, from);
    if (hit.pos == std::string::npos) break;
    const std::string_view before = std::string_view(buf_).substr(0, hit.pos);
    if (hit.marker == kEos) {
      append_value(before);
      buf_.erase(0, hit.pos);  // step_structure consumes the marker
      warn("parameter not closed before end-of-sentence");
      end_param();
      state_ = State::kInvoke;
      return true;
    }
    const size_t q = buf_.find('>', hit.pos);
    // Another anchor before this one's '>': this one is value text (a file's content that
    // mentions the marker), and the '>' belongs to the next tag, possibly the real closing one
    // (the reference reads up to "</｜DSML｜ parameter"; this anchor swallowed it).
    const MarkerHit next =
        find_first_marker(buf_, {kDsmlTagOpen, kDsmlTagClose, kEos}, hit.pos + hit.marker.size());
    if (next.pos != std::string::npos && (q == std::string::npos || next.pos < q)) {
      from = hit.pos + 1;
      continue;
    }
    if (q == std::string::npos || q - hit.pos > kMaxTagBytes) {
      if (q == std::string::npos && buf_.size() - hit.pos <= kMaxTagBytes) {
        append_value(before);
        buf_.erase(0, hit.pos);
        if (!final) return false;
        warn("incomplete DSML tag dropped");
        buf_.clear();
        return false;
      }
      from = hit.pos + 1;  // too long to be a tag: value text
      continue;
    }
    const DsmlTag t = classify_dsml_tag(std::string_view(buf_).substr(hit.pos, q + 1 - hit.pos));
    const bool closes_param = t.kind == DsmlTag::Kind::kParameter && t.closing;
    const bool ends_param = (t.kind == DsmlTag::Kind::kParameter && !t.closing) ||
                            (t.closing && t.kind != DsmlTag::Kind::kUnknown);
    if (closes_param || ends_param) {
      append_value(before);
      buf_.erase(0, closes_param ? q + 1 : hit.pos);
      if (!closes_param) warn("parameter not closed before the next tag");
      end_param();
      state_ = State::kInvoke;
      return true;
    }
    from = q + 1;  // another tag inside the value is value text (as in the reference)
  }
  size_t n = buf_.size();
  if (!final) {
    n -= partial_marker_suffix(buf_, {kDsmlTagOpen, kDsmlTagClose, kEos});
    n = utf8_complete_prefix(std::string_view(buf_).substr(0, n));
  }
  append_value(std::string_view(buf_).substr(0, n));
  buf_.erase(0, n);
  return false;
}

void OutputParser::start_call(const std::string& name, bool has_name) {
  if (!has_name) warn("invoke without a name attribute");
  ParseEvent e;
  e.kind = ParseEvent::Kind::kToolCallStart;
  e.index = call_count_;
  e.id = next_call_id();
  e.name = name;
  out_->push_back(std::move(e));
  param_names_.clear();
}

void OutputParser::end_call() {
  emit(ParseEvent::Kind::kToolCallArguments, param_names_.empty() ? "{}" : "}");
  ParseEvent e;
  e.kind = ParseEvent::Kind::kToolCallEnd;
  e.index = call_count_;
  out_->push_back(std::move(e));
  ++call_count_;
}

void OutputParser::start_param(const std::string& name, const std::string& flag, bool has_name) {
  if (!has_name) warn("parameter without a name attribute");
  if (flag != "true" && flag != "false")
    warn(fmt::format("parameter '{}': string=\"{}\" is not true|false; read as JSON if valid", name,
                     flag));
  param_skip_ = std::find(param_names_.begin(), param_names_.end(), name) != param_names_.end();
  if (param_skip_) {
    warn(fmt::format("duplicate parameter '{}' dropped", name));
    return;
  }
  param_string_ = flag == "true";
  param_raw_.clear();
  std::string delta = param_names_.empty() ? "{" : ", ";
  json::append_string(delta, name);
  delta += param_string_ ? ": \"" : ": ";
  param_names_.push_back(name);
  emit(ParseEvent::Kind::kToolCallArguments, std::move(delta));
}

void OutputParser::append_value(std::string_view text) {
  if (param_skip_ || text.empty()) return;
  if (!param_string_) {
    param_raw_.append(text);
    return;
  }
  std::string escaped;
  json::append_string_body(escaped, text);
  emit(ParseEvent::Kind::kToolCallArguments, std::move(escaped));
}

void OutputParser::end_param() {
  if (param_skip_) {
    param_skip_ = false;
    return;
  }
  if (param_string_) {
    emit(ParseEvent::Kind::kToolCallArguments, "\"");
  } else if (is_valid_json(param_raw_)) {
    emit(ParseEvent::Kind::kToolCallArguments, param_raw_);
  } else {
    warn(fmt::format("parameter '{}': value is not valid JSON; sent as a string",
                     param_names_.back()));
    emit(ParseEvent::Kind::kToolCallArguments, json::quote(param_raw_));
  }
  param_raw_.clear();
}

void OutputParser::emit_text(std::string_view text) {
  if (text.empty()) return;
  const bool reasoning = state_ == State::kReasoning;
  std::string& tail = reasoning ? reasoning_tail_ : content_tail_;
  // `text` never holds a whole tag anchor, but joined to what this channel already emitted it
  // can (text after a dropped marker or a calls block): cut the anchor's part out of `text`.
  std::string piece(text);
  while (true) {
    const std::string joined = tail + piece;
    const MarkerHit hit = find_first_marker(joined, {kDsmlTagOpen, kDsmlTagClose});
    if (hit.pos == std::string::npos || hit.pos + hit.marker.size() <= tail.size() ||
        hit.pos >= tail.size())
      break;
    warn("DSML tag anchor formed across dropped markup removed");
    piece.erase(0, hit.pos + hit.marker.size() - tail.size());
  }
  if (piece.empty()) return;
  tail += piece;
  if (tail.size() > kDsmlTagClose.size()) tail.erase(0, tail.size() - kDsmlTagClose.size());
  emit(reasoning ? ParseEvent::Kind::kReasoning : ParseEvent::Kind::kContent, std::move(piece));
}

void OutputParser::emit(ParseEvent::Kind kind, std::string text) {
  const bool is_text = kind == ParseEvent::Kind::kReasoning || kind == ParseEvent::Kind::kContent ||
                       kind == ParseEvent::Kind::kToolCallArguments;
  const int index = kind == ParseEvent::Kind::kToolCallArguments ? call_count_ : -1;
  // Adjacent deltas of one kind produced by the same feed() are merged into one event.
  if (is_text && out_->size() > merge_floor_ && out_->back().kind == kind &&
      out_->back().index == index) {
    out_->back().text += text;
    return;
  }
  ParseEvent e;
  e.kind = kind;
  e.text = std::move(text);
  e.index = index;
  out_->push_back(std::move(e));
}

void OutputParser::warn(std::string message) { warnings_.push_back(std::move(message)); }

std::string OutputParser::next_call_id() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng_() % 62];
  return id;
}

}  // namespace dsv41::chat
