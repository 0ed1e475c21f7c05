// ToolCallGrammar (see tool_call_grammar.hpp): literal parts as alternatives matched byte by byte,
// free parts (key, string value, JSON scalar) as small bounded machines.
#include "sampling/tool_call_grammar.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace dsv41::sampling {

namespace {

// Marker bytes as chat/markers.hpp spells them ("｜" is U+FF5C).
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kCallsOpen = "<｜DSML｜ calls>\n";
constexpr std::string_view kInvokeOpen = "<｜DSML｜ invoke name=\"";
constexpr std::string_view kParamOpen = "<｜DSML｜ parameter name=\"";
constexpr std::string_view kCallEnd = "</｜DSML｜ invoke>\n</｜DSML｜ calls>";
constexpr std::string_view kParamClose = "</｜DSML｜ parameter>\n";

// Fixed alternative indices; the names follow from kFirstName.
enum : int {
  kStart,
  kOpenParam,
  kEndNoParams,
  kEndAfterParams,
  kTypeTrue,
  kTypeFalse,
  kClose,
  kFirstName
};

bool key_byte(uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool digit(uint8_t c) { return c >= '0' && c <= '9'; }

// JSON scalar sub-states.
enum : int { kSBegin, kSMinus, kSZero, kSInt, kSDot, kSFrac, kSWord };

}  // namespace

ToolCallGrammar::ToolCallGrammar(ToolCallGrammarSpec spec) {
  DSV41_CHECK(!spec.names.empty(), kInvalidArgument, "tools: a forced tool call needs a tool");
  DSV41_CHECK(spec.names.size() <= kMaxNames, kInvalidArgument,
              "tools: {} tools, at most {} with a forced tool_choice", spec.names.size(),
              kMaxNames);
  for (size_t i = 0; i < spec.names.size(); ++i) {
    const std::string& n = spec.names[i];
    DSV41_CHECK(!n.empty() && n.find_first_of("\"<>\n") == std::string::npos, kInvalidArgument,
                "tools[{}].function.name: '{}' cannot be forced (empty or contains \", <, > or a "
                "newline)",
                i, n);
  }
  DSV41_CHECK(spec.max_params >= 0 && spec.max_key >= 1 && spec.max_string >= 0, kInvalidArgument,
              "ToolCallGrammarSpec: bounds must be >= 0 (max_key >= 1)");
  auto alts = std::make_shared<std::vector<Alt>>();
  std::string start = spec.close_think ? std::string(kThinkEnd) : std::string();
  start += kCallsOpen;
  start += kInvokeOpen;
  alts->push_back({start, Next::kName});
  alts->push_back({std::string(kParamOpen), Next::kKeyThenType});
  alts->push_back({"\n" + std::string(kCallEnd), Next::kDone});
  alts->push_back({std::string(kCallEnd), Next::kDone});
  alts->push_back({"\" string=\"true\">", Next::kTypeTrue});
  alts->push_back({"\" string=\"false\">", Next::kTypeFalse});
  alts->push_back({std::string(kParamClose), Next::kParamClose});
  for (const std::string& n : spec.names) alts->push_back({n + "\">\n", Next::kParamOrEnd});
  alts_ = std::move(alts);
  spec_ = std::make_shared<const ToolCallGrammarSpec>(std::move(spec));
  enter_choice({kStart});
}

void ToolCallGrammar::enter_choice(std::vector<int> alts) {
  state_ = State::kChoice;
  choice_ = std::move(alts);
  matched_ = 0;
}

void ToolCallGrammar::after_choice(Next next) {
  run_ = 0;
  switch (next) {
    case Next::kName: {
      std::vector<int> names(spec_->names.size());
      for (size_t i = 0; i < names.size(); ++i) names[i] = kFirstName + static_cast<int>(i);
      return enter_choice(std::move(names));
    }
    case Next::kParamOrEnd:
      if (spec_->max_params > 0) return enter_choice({kOpenParam, kEndNoParams});
      return enter_choice({kEndNoParams});
    case Next::kParamClose:
      if (params_ < spec_->max_params) return enter_choice({kOpenParam, kEndAfterParams});
      return enter_choice({kEndAfterParams});
    case Next::kKeyThenType:
      ++params_;
      state_ = State::kKey;
      return;
    case Next::kTypeTrue:
      state_ = State::kString;
      return;
    case Next::kTypeFalse:
      state_ = State::kScalar;
      scalar_ = kSBegin;
      return;
    case Next::kDone:
      state_ = State::kDone;
      return;
  }
}

bool ToolCallGrammar::scalar_complete() const {
  if (scalar_ == kSZero || scalar_ == kSInt || scalar_ == kSFrac) return true;
  if (scalar_ != kSWord) return false;
  return false;  // a word is complete only as a whole literal, checked in feed_scalar
}

bool ToolCallGrammar::feed_scalar(uint8_t c) {
  // Words (true/false/null) are matched as alternatives of their own: scalar_ = kSWord and
  // choice_ holds the word's remaining bytes in word_.
  switch (scalar_) {
    case kSBegin:
      if (c == '-') return scalar_ = kSMinus, run_ = 1, true;
      if (c == '0') return scalar_ = kSZero, run_ = 1, true;
      if (digit(c)) return scalar_ = kSInt, run_ = 1, true;
      return false;
    case kSMinus:
      if (c == '0') return scalar_ = kSZero, ++run_, true;
      if (digit(c)) return scalar_ = kSInt, ++run_, true;
      return false;
    case kSZero:
      if (c == '.') return scalar_ = kSDot, run_ = 0, true;
      return false;
    case kSInt:
      if (digit(c) && run_ < 15) return ++run_, true;
      if (c == '.') return scalar_ = kSDot, run_ = 0, true;
      return false;
    case kSDot:
      if (digit(c)) return scalar_ = kSFrac, run_ = 1, true;
      return false;
    case kSFrac:
      if (digit(c) && run_ < 6) return ++run_, true;
      return false;
    default:
      return false;
  }
}

bool ToolCallGrammar::feed(uint8_t c) {
  switch (state_) {
    case State::kDone:
      return false;
    case State::kKey:
      if (key_byte(c) && run_ < spec_->max_key) return ++run_, true;
      if (c == '"' && run_ > 0) {
        enter_choice({kTypeTrue, kTypeFalse});
        matched_ = 1;
        return true;
      }
      return false;
    case State::kString:
      if (c == '<') {
        enter_choice({kClose});
        matched_ = 1;
        return true;
      }
      if (c >= 0x20 && c < 0x7f && run_ < spec_->max_string) return ++run_, true;
      return false;
    case State::kScalar:
      if (c == '<' && scalar_complete()) {
        enter_choice({kClose});
        matched_ = 1;
        return true;
      }
      if (scalar_ == kSBegin && (c == 't' || c == 'f' || c == 'n')) {
        // true / false / null: the rest is a literal followed by the parameter close.
        static const std::string_view kWords[] = {"true", "false", "null"};
        const std::string_view w = c == 't' ? kWords[0] : c == 'f' ? kWords[1] : kWords[2];
        scalar_ = kSWord;
        word_ = std::string(w.substr(1)) + std::string(kParamClose);
        return true;
      }
      if (scalar_ == kSWord) {
        if (word_.empty() || static_cast<uint8_t>(word_[0]) != c) return false;
        word_.erase(0, 1);
        if (word_.empty()) after_choice(Next::kParamClose);
        return true;
      }
      return feed_scalar(c);
    case State::kChoice: {
      const std::vector<Alt>& alts = *alts_;
      std::vector<int> alive;
      for (int a : choice_) {
        const std::string& t = alts[a].text;
        if (matched_ < t.size() && static_cast<uint8_t>(t[matched_]) == c) alive.push_back(a);
      }
      if (alive.empty()) return false;
      choice_ = std::move(alive);
      ++matched_;
      for (int a : choice_) {
        if (alts[a].text.size() == matched_) return after_choice(alts[a].next), true;
      }
      return true;
    }
  }
  return false;
}

bool ToolCallGrammar::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (!feed(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

std::string ToolCallGrammar::forced() const {
  if (state_ == State::kScalar && scalar_ == kSWord) return word_;
  if (state_ != State::kChoice) return {};
  const std::vector<Alt>& alts = *alts_;
  if (choice_.size() == 1) return alts[choice_[0]].text.substr(matched_);
  // Alternatives may share bytes beyond the match (e.g. names with a common prefix).
  std::string common = alts[choice_[0]].text.substr(matched_);
  for (int a : choice_) {
    const std::string& t = alts[a].text;
    size_t n = 0;
    while (n < common.size() && matched_ + n < t.size() && t[matched_ + n] == common[n]) ++n;
    common.resize(n);
  }
  return common;
}

}  // namespace dsv41::sampling
