// The pre-tokenizer of a byte-level BPE tokenizer.json: a sequence of Split(regex) steps, each
// applied to every piece the previous step produced (HF PreTokenizer Sequence semantics), run
// with PCRE2 (UTF + UCP, JIT). The final ByteLevel step is the BPE's byte alphabet, not a split.
//
// Oniguruma (the `tokenizers` engine) and PCRE2 differ in `\s`: Oniguruma's is Unicode
// White_Space, PCRE2's UCP `\s` adds U+180E. `\s`/`\S` outside classes and `\s` inside classes
// are rewritten to the explicit White_Space set, so they agree (docs/tokenizer.md).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsv41 {

enum class SplitBehavior { kIsolated, kRemoved };

class PreTokenizer {
 public:
  // Per-call PCRE2 match state; one per thread (encode() makes one per call).
  class Scratch;
  struct ScratchDeleter {
    void operator()(Scratch* s) const;
  };
  using ScratchPtr = std::unique_ptr<Scratch, ScratchDeleter>;
  // A piece: byte range [begin, end) of the text given to split().
  using PieceFn = void (*)(void* ctx, size_t begin, size_t end);

  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Appends a Split step. Throws detail::Failure(kUnsupported) with `where` and PCRE2's message
  // if the pattern does not compile.
  void add_split(std::string_view regex, SplitBehavior behavior, const std::string& where);
  // A literal-string Split pattern ({"String": ...}).
  void add_literal_split(std::string_view literal, SplitBehavior behavior,
                         const std::string& where);
  size_t steps() const;

  ScratchPtr make_scratch() const;
  // Calls fn for each final piece of `text` (valid UTF-8, checked by the caller), in order.
  // Throws detail::Failure(kInvalidArgument) if PCRE2 gives up (resource limits) on a piece.
  void split(std::string_view text, Scratch& scratch, PieceFn fn, void* ctx) const;

  // `\s` -> White_Space rewrite (exposed for tests).
  static std::string rewrite_whitespace_classes(std::string_view regex);

 private:
  struct Step;
  void split_from(size_t step, std::string_view text, size_t begin, size_t end, Scratch& scratch,
                  PieceFn fn, void* ctx) const;
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace dsv41
