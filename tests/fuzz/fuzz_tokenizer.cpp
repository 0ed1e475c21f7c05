// libFuzzer target: arbitrary bytes through encode (both parse_special modes), decode and the
// stream detokenizer of the tiny golden tokenizer. Invariants: invalid UTF-8 is refused with
// kInvalidArgument (never a crash); for valid UTF-8, decode(encode(x)) == x and the streamed
// decode equals the one-shot decode. Arbitrary id lists (the input read as int32s) decode or are
// refused with kInvalidArgument.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace {

const dsv41::Tokenizer& tokenizer() {
  static const auto tok =
      dsv41::Tokenizer::load(DSV41_FIXTURES_DIR "/golden/tokenizer/tiny_tokenizer.json");
  return *tok;
}

std::string streamed(const dsv41::Tokenizer& tok, const std::vector<int32_t>& ids) {
  dsv41::StreamDetokenizer stream(tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string part = stream.push(id);
    if (dsv41::utf8::first_invalid(part)) std::abort();  // a broken sequence escaped
    out += part;
  }
  return out + stream.flush();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const dsv41::Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = !dsv41::utf8::first_invalid(text).has_value();
  for (bool special : {true, false}) {
    try {
      const auto ids = tok.encode(text, special);
      if (!valid) std::abort();  // invalid UTF-8 must be refused
      const std::string back = tok.decode(ids);
      if (back != text) std::abort();
      if (streamed(tok, ids) != back) std::abort();
    } catch (const dsv41::detail::Failure& f) {
      if (valid || f.code() != dsv41::ErrorCode::kInvalidArgument) std::abort();
    }
  }
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  for (auto& id : ids) id = id % 2048;  // mostly in range (1,738 ids), some not, some negative
  try {
    const std::string text_out = tok.decode(ids);
    if (dsv41::utf8::first_invalid(text_out)) std::abort();
    if (streamed(tok, ids) != text_out) std::abort();
  } catch (const dsv41::detail::Failure& f) {
    if (f.code() != dsv41::ErrorCode::kInvalidArgument) std::abort();
  }
  return 0;
}
