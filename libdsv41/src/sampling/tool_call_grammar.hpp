// Byte-level automaton of one forced DSML tool call (api-and-clients.md §3.3, the format
// chat::OutputParser parses and chat::dsml_writer writes), used by ToolCallConstraint to mask the
// logits of a request with tool_choice required / named (docs/sampling.md "Constrained tool
// calls"). Accepted language, with NAME one of the allowed names:
//
//   [</think>] <｜DSML｜ calls>\n<｜DSML｜ invoke name="NAME">\n
//   ( <｜DSML｜ parameter name="KEY" string="true">STR</｜DSML｜ parameter>\n
//   | <｜DSML｜ parameter name="KEY" string="false">SCALAR</｜DSML｜ parameter>\n ){0,max_params}
//   \n</｜DSML｜ invoke>\n</｜DSML｜ calls>
//
// (the separators exactly as the writer emits them; "\n\n" before </invoke> only without
// parameters, else one "\n" after the last parameter). KEY: [A-Za-z0-9_]{1,max_key}; STR:
// printable ASCII without '<', at most max_string bytes; SCALAR: a JSON number
// -?(0|[1-9][0-9]{0,14})(.[0-9]{1,6})? or true / false / null. Every bounded part keeps the
// whole call finite, so a completion is always reachable. Plain value type, cheap to copy.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsv41::sampling {

struct ToolCallGrammarSpec {
  std::vector<std::string> names;  // allowed function names, 1..kMaxNames, non-empty, no '"'
  bool close_think = false;        // the prompt ended in <think>: start with </think>
  int max_params = 4;
  int max_key = 32;
  int max_string = 48;
};

class ToolCallGrammar {
 public:
  static constexpr size_t kMaxNames = 128;
  // Throws kInvalidArgument naming the bad field (names empty / too many / bad name).
  explicit ToolCallGrammar(ToolCallGrammarSpec spec);

  // Feeds one byte; false (state unchanged) when it cannot continue a valid prefix.
  bool feed(uint8_t c);
  // Feeds every byte; false when one is rejected (the state is then unspecified: use a copy).
  bool feed(std::string_view bytes);
  // The whole call has been produced: only the end of turn may follow.
  bool complete() const { return state_ == State::kDone; }
  // The bytes that must come next when exactly one continuation is legal (a literal part), else
  // empty. Never empty before complete() unless the model has a choice.
  std::string forced() const;

 private:
  enum class State { kChoice, kKey, kString, kScalar, kDone };
  enum class Next { kName, kParamOrEnd, kKeyThenType, kTypeTrue, kTypeFalse, kParamClose, kDone };
  struct Alt {
    std::string text;
    Next next;
  };
  void enter_choice(std::vector<int> alts);
  void after_choice(Next next);
  bool feed_scalar(uint8_t c);
  bool scalar_complete() const;

  std::shared_ptr<const ToolCallGrammarSpec> spec_;
  std::shared_ptr<const std::vector<Alt>> alts_;  // every literal alternative, by index
  State state_ = State::kChoice;
  // kChoice: the alternatives still alive and how many bytes of them matched.
  std::vector<int> choice_;
  size_t matched_ = 0;
  int params_ = 0;    // parameters started
  int run_ = 0;       // bytes of the current key / string / scalar
  int scalar_ = 0;    // kScalar sub-state
  std::string word_;  // kScalar: rest of true/false/null plus the parameter close
};

}  // namespace dsv41::sampling
