#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.hpp"

#include <pcre2.h>

#include <cctype>

#include "core/check.hpp"
#include "tokenizer/utf8.hpp"

namespace dsv41 {
namespace {

// Unicode White_Space (PropList.txt), the set Oniguruma's `\s` matches.
constexpr std::string_view kWhiteSpaceRanges =
    "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
    "\\x{205f}\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buf));
}

}  // namespace

struct PreTokenizer::Step {
  pcre2_code* code = nullptr;
  bool jit = false;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  std::string where;
  ~Step() { pcre2_code_free(code); }
};

class PreTokenizer::Scratch {
 public:
  std::vector<pcre2_match_data*> data;
  ~Scratch() {
    for (auto* d : data) pcre2_match_data_free(d);
  }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
size_t PreTokenizer::steps() const { return steps_.size(); }

std::string PreTokenizer::rewrite_whitespace_classes(std::string_view re) {
  std::string out;
  out.reserve(re.size() + 64);
  bool in_class = false;
  size_t i = 0;
  while (i < re.size()) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[i + 1];
      if (e == 'Q') {  // literal run up to \E
        const size_t end = re.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? re.size() : end + 2;
        out.append(re.substr(i, stop - i));
        i = stop;
        continue;
      }
      if (e == 's') {
        out +=
            in_class ? std::string(kWhiteSpaceRanges) : "[" + std::string(kWhiteSpaceRanges) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceRanges) + "]";
      } else {
        out.append(re.substr(i, 2));
      }
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      ++i;
      if (i < re.size() && re[i] == '^') out.push_back(re[i++]);
      if (i < re.size() && re[i] == ']') out.push_back(re[i++]);  // a leading ']' is literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < re.size() && re[i + 1] == ':') {  // POSIX [:name:]
      const size_t end = re.find(":]", i + 2);
      const size_t stop = end == std::string_view::npos ? i + 1 : end + 2;
      out.append(re.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
    ++i;
  }
  return out;
}

void PreTokenizer::add_split(std::string_view regex, SplitBehavior behavior,
                             const std::string& where) {
  const std::string pattern = rewrite_whitespace_classes(regex);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  auto step = std::make_unique<Step>();
  step->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  DSV41_CHECK(step->code != nullptr, kUnsupported, "{}: regex does not compile with PCRE2: {}",
              where, pcre2_message(err));
  step->jit = pcre2_jit_compile(step->code, PCRE2_JIT_COMPLETE) == 0;
  step->behavior = behavior;
  step->where = where;
  steps_.push_back(std::move(step));
}

void PreTokenizer::add_literal_split(std::string_view literal, SplitBehavior behavior,
                                     const std::string& where) {
  std::string re;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) re.push_back('\\');
    re.push_back(c);
  }
  add_split(re, behavior, where);
}

void PreTokenizer::ScratchDeleter::operator()(Scratch* s) const { delete s; }

PreTokenizer::ScratchPtr PreTokenizer::make_scratch() const {
  ScratchPtr s(new Scratch());
  for (const auto& st : steps_) {
    s->data.push_back(pcre2_match_data_create_from_pattern(st->code, nullptr));
    DSV41_CHECK(s->data.back() != nullptr, kOutOfMemory, "PCRE2 match data allocation failed");
  }
  return s;
}

void PreTokenizer::split(std::string_view text, Scratch& scratch, PieceFn fn, void* ctx) const {
  if (text.empty()) return;
  split_from(0, text, 0, text.size(), scratch, fn, ctx);
}

void PreTokenizer::split_from(size_t k, std::string_view text, size_t begin, size_t end,
                              Scratch& scratch, PieceFn fn, void* ctx) const {
  if (k == steps_.size()) {
    fn(ctx, begin, end);
    return;
  }
  const Step& st = *steps_[k];
  pcre2_match_data* md = scratch.data[k];
  // The piece is the whole subject: lookarounds such as (?!\S) see its end, not the next piece.
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
  const size_t len = end - begin;
  size_t pos = 0;     // start of the pending gap
  size_t search = 0;  // where the next match attempt starts
  while (search < len) {
    int rc = st.jit ? pcre2_jit_match(st.code, subject, len, search, 0, md, nullptr)
                    : PCRE2_ERROR_JIT_STACKLIMIT;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // the interpreter keeps its backtrack state on the heap
      rc = pcre2_match(st.code, subject, len, search, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                       nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    DSV41_CHECK(rc >= 0, kInvalidArgument,
                "{}: PCRE2 gave up on a {}-byte piece at text byte {}: {}", st.where, len, begin,
                pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t ms = ov[0], me = ov[1];
    if (me == ms) {  // an empty match makes no piece; retry one character further
      if (ms >= len) break;
      search = ms + utf8::sequence_length(static_cast<unsigned char>(text[begin + ms]));
      continue;
    }
    if (ms > pos) split_from(k + 1, text, begin + pos, begin + ms, scratch, fn, ctx);
    if (st.behavior == SplitBehavior::kIsolated)
      split_from(k + 1, text, begin + ms, begin + me, scratch, fn, ctx);
    pos = search = me;
  }
  if (pos < len) split_from(k + 1, text, begin + pos, end, scratch, fn, ctx);
}

}  // namespace dsv41
