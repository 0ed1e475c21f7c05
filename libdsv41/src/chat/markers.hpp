// Marker strings of the DeepSeek-V4.1 chat format (api-and-clients.md §3.1, model-architecture.md
// §8.2). "｜" is U+FF5C, "▁" is U+2581. The V4.1 DSML tag names carry a leading space.
#pragma once

#include <string_view>

namespace dsv41::chat::markers {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kSystem = "<｜System｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kImage = "<｜deepseek_image｜>";
inline constexpr std::string_view kToolResultOpen = "<tool_result>";
inline constexpr std::string_view kToolResultClose = "</tool_result>";

// DSML tags as the renderer writes them.
inline constexpr std::string_view kDsml = "｜DSML｜";
inline constexpr std::string_view kCallsOpen = "<｜DSML｜ calls>";
inline constexpr std::string_view kCallsClose = "</｜DSML｜ calls>";
inline constexpr std::string_view kInvokeOpenPrefix = "<｜DSML｜ invoke name=\"";
inline constexpr std::string_view kInvokeClose = "</｜DSML｜ invoke>";
inline constexpr std::string_view kParamOpenPrefix = "<｜DSML｜ parameter name=\"";
inline constexpr std::string_view kParamClose = "</｜DSML｜ parameter>";
// Any DSML tag, opening or closing, starts with one of these (the parser's anchors).
inline constexpr std::string_view kDsmlTagOpen = "<｜DSML｜";
inline constexpr std::string_view kDsmlTagClose = "</｜DSML｜";

}  // namespace dsv41::chat::markers
