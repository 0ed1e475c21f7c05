// libFuzzer target: arbitrary bytes as a chat request JSON → request parsing, option resolution
// and prompt rendering. Errors are expected; crashes and hangs are not.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat/prompt_renderer.hpp"
#include "chat/request_json.hpp"
#include "core/check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto request = dsv41::chat::parse_chat_request_json(text);
  if (!request.is_ok()) return 0;
  for (const auto& table :
       {dsv41::chat::EffortTable::release(), dsv41::chat::EffortTable::prerelease()}) {
    dsv41::chat::ResolvedOptions resolved;
    const dsv41::Status st = dsv41::detail::capture_status([&] {
      resolved = dsv41::chat::resolve_options(request->options, !request->tools.empty(), table);
    });
    if (!st.is_ok()) continue;
    (void)dsv41::chat::render_request(*request, resolved);
  }
  return 0;
}
