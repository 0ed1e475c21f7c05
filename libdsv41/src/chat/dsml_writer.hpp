// Writing DSML: the "## Tools" system-prompt section and assistant tool-call blocks, exactly as
// the reference encoder formats them (api-and-clients.md §3.2, §3.4).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/messages.hpp"

namespace dsv41::chat {

// The tools section (heading, DSML usage instructions, one json.dumps line per tool, closing rule).
std::string render_tools_section(const std::vector<ToolSpec>& tools);

// "\n\n<｜DSML｜ calls>\n" + invokes joined by "\n" + "\n</｜DSML｜ calls>". Arguments are decoded
// once (json.loads); string values are written raw with string="true", everything else as
// json.dumps with string="false". `path` names the message in errors
// ("messages[2].tool_calls[0].function.arguments: must be a JSON object").
void append_tool_calls_block(std::string& out, const std::vector<ToolCall>& calls,
                             std::string_view path);

}  // namespace dsv41::chat
