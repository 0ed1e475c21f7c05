// Reading the chat golden files (tests/fixtures/golden/chat/*.jsonl) for the chat unit tests.
#pragma once

#include <simdjson.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/fixtures.hpp"

namespace dsv41::test {

// One parsed JSONL row; owns its parser so the DOM stays valid.
struct JsonRow {
  std::unique_ptr<simdjson::dom::parser> parser = std::make_unique<simdjson::dom::parser>();
  simdjson::dom::element root;
  std::string name;
};

inline std::vector<JsonRow> read_chat_golden(const std::string& file) {
  const std::string path = fixture("golden/chat/" + file);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<JsonRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    JsonRow row;
    row.root = row.parser->parse(line);
    row.name = std::string(std::string_view(row.root["name"]));
    rows.push_back(std::move(row));
  }
  return rows;
}

inline std::string str(simdjson::dom::element e) { return std::string(std::string_view(e)); }

}  // namespace dsv41::test
