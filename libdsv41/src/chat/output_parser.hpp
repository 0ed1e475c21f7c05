// Incremental parser of DeepSeek-V4.1 generated text: one object per request, fed the detokenized
// stream chunk by chunk, emitting reasoning / content deltas and tool calls whose arguments grow
// as a JSON object (api-and-clients.md §3.3, §3.4, §2.6). Text that could still become a marker is
// held back, so no marker prefix ever reaches content. Malformed markup never throws: the text
// stays text (or is dropped when it is DSML markup) and a warning is recorded (docs/chat.md).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace dsv41::chat {

struct ParseEvent {
  enum class Kind {
    kReasoning,
    kContent,
    kToolCallStart,
    kToolCallArguments,
    kToolCallEnd,
    kFinish
  };
  Kind kind = Kind::kContent;
  std::string text;  // reasoning / content / arguments delta
  int index = -1;    // tool call index (0, 1, ...) for the kToolCall* kinds
  std::string id;    // kToolCallStart: "call_" + 24 alphanumerics
  std::string name;  // kToolCallStart
};

struct ParserOptions {
  bool thinking = true;  // the prompt ended with <think>: output starts in reasoning
  // Seed of the tool-call id generator; absent = std::random_device.
  std::optional<uint64_t> seed;
};

class OutputParser {
 public:
  explicit OutputParser(const ParserOptions& options);

  // Consumes one chunk; appends the events it completes to *events.
  void feed(std::string_view chunk, std::vector<ParseEvent>& events);
  // End of generation: flushes held-back text, closes open structures (with warnings) and
  // appends kFinish. Further feed() calls are ignored.
  void finish(std::vector<ParseEvent>& events);

  const std::vector<std::string>& warnings() const { return warnings_; }
  bool saw_eos() const { return saw_eos_; }
  int tool_call_count() const { return call_count_; }
  // finish() found a call still open (inside an invoke or a parameter value) and closed it: its
  // arguments are what was generated, not what the model meant (max_tokens cut it).
  bool closed_an_open_call() const { return closed_open_call_; }

 private:
  enum class State { kReasoning, kContent, kBlock, kInvoke, kParam, kDone };

  void process(bool final);
  bool step_text(bool final);
  bool step_structure(bool final);
  bool step_param(bool final);
  enum class TagRead { kTag, kNeedMore, kDropped };
  // The DSML tag at the start of buf_ (anchor through '>'); an incomplete one at the end of the
  // output, or one longer than any real tag, is dropped.
  TagRead take_tag(bool final, std::string& tag);
  void handle_structure_tag(const std::string& tag);
  void start_call(const std::string& name, bool has_name);
  void end_call();
  void start_param(const std::string& name, const std::string& flag, bool has_name);
  void append_value(std::string_view text);
  void end_param();
  void emit_text(std::string_view text);
  void emit(ParseEvent::Kind kind, std::string text);
  void warn(std::string message);
  std::string next_call_id();

  ParserOptions options_;
  std::mt19937_64 rng_;
  std::string buf_;  // received, not yet consumed
  bool closed_open_call_ = false;
  State state_;
  bool finished_ = false;
  bool saw_eos_ = false;
  bool saw_think_end_ = false;
  std::vector<ParseEvent>* out_ = nullptr;
  size_t merge_floor_ = 0;  // events before this index belong to earlier calls: never merged
  std::vector<std::string> warnings_;
  // The last bytes emitted per text channel (a tag anchor must not form across two deltas).
  std::string reasoning_tail_;
  std::string content_tail_;
  // Current tool call and parameter.
  int call_count_ = 0;
  std::vector<std::string> param_names_;
  bool param_string_ = false;
  bool param_skip_ = false;
  std::string param_flag_;
  std::string param_raw_;  // non-string parameter text, validated at its close
};

}  // namespace dsv41::chat
