// Shared checks of the chat parser tests: feeding a text in chunks, comparing a parsed message
// with a golden `expected` object, and the event-stream invariants.
#pragma once

#include <simdjson.h>

#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/parsed_message.hpp"
#include "core/json_writer.hpp"

namespace dsv41::test {

// Feeds `text` cut at the byte offsets `cuts` (ascending), then finishes; checks the event
// invariants on the way and returns the folded message.
chat::ParsedMessage parse_in_chunks(std::string_view text, const std::vector<size_t>& cuts,
                                    bool thinking);

// Offsets of every code point boundary of `text` (one code point per chunk).
std::vector<size_t> code_point_cuts(std::string_view text);

// python-dumps normal form of a JSON text (for comparing argument objects).
std::string normal_json(std::string_view json_text);

// reasoning / content / tool calls equal the golden `expected` object; arguments must equal
// arguments_text_reference byte for byte.
void check_expected(const chat::ParsedMessage& got, simdjson::dom::element expected);

}  // namespace dsv41::test
