// libFuzzer target: the streaming chat output parser on arbitrary bytes, fed in chunks whose
// sizes come from the input itself, in both thinking modes. Must never crash, hang or leak DSML
// markup into reasoning/content.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "chat/parsed_message.hpp"

namespace {

void run(std::string_view text, bool thinking, uint8_t split_seed) {
  dsv41::chat::OutputParser parser({thinking, 1});
  std::vector<dsv41::chat::ParseEvent> events;
  // Chunk sizes cycle through 1..16 starting from the first input byte.
  size_t pos = 0;
  size_t step = split_seed;
  while (pos < text.size()) {
    const size_t len = 1 + (step++ % 16);
    parser.feed(text.substr(pos, len), events);
    pos += len;
  }
  parser.finish(events);
  dsv41::chat::MessageAccumulator acc;
  acc.apply(events);
  const auto& m = acc.message();
  // Input that never contained the DSML marker cannot produce it; input that did must not leak
  // a tag anchor into text.
  for (const std::string* s : {&m.content, &m.reasoning_content}) {
    if (s->find("<｜DSML｜") != std::string::npos || s->find("</｜DSML｜") != std::string::npos)
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const uint8_t seed = size ? data[0] : 0;
  run(text, true, seed);
  run(text, false, seed);
  return 0;
}
