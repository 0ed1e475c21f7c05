// libFuzzer target: arbitrary bytes through JsonGrammar + JsonSchemaTracker for one schema that
// uses every enforced keyword (nested objects, a recursive $ref, integer / number / enum / null
// unions, bounded arrays, a free value). Bytes either one refuses are skipped. When the object
// closes, simdjson parses what was taken and a separate walk of the parsed document checks it
// against the schema (types, integers written without fraction or exponent, keys only from
// properties and each once, required keys, item bounds, enum values). A refused byte must leave
// the tracker as it was, and every byte it takes must be in its next_bytes().
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "sampling/json_grammar.hpp"
#include "sampling/json_schema.hpp"
#include "sampling/json_schema_tracker.hpp"

namespace {

using dsv41::sampling::JsonSchema;
using dsv41::sampling::JsonSchemaNode;

const char* kSchema = R"({"type":"object","required":["id","kind"],"properties":{
  "id":{"type":"integer"},"score":{"type":["number","null"]},
  "kind":{"enum":["a","b\"c","long value"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":2},
  "child":{"$ref":"#/$defs/Node"},"any":{},
  "flag":{"anyOf":[{"type":"boolean"},{"type":"object","properties":{"x":{"type":"null"}}}]}},
  "$defs":{"Node":{"type":"object","properties":{"v":{"type":"integer"},
    "kids":{"type":"array","items":{"$ref":"#/$defs/Node"},"minItems":1}},"required":["v"]}}})";

const JsonSchema& schema() {
  static const std::shared_ptr<const JsonSchema> s = *dsv41::sampling::compile_json_schema(kSchema);
  return *s;
}

// Integers stay "0", other numbers become "0.5" (simdjson refuses numbers outside double /
// 64-bit range, which JSON allows), so the walk still tells integers from the rest.
std::string normalise_numbers(const std::string& text) {
  std::string out;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      ++i;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i;
      bool fraction = false;
      while (j < text.size() && std::string("+-.eE0123456789").find(text[j]) != std::string::npos) {
        fraction = fraction || text[j] == '.' || text[j] == 'e' || text[j] == 'E';
        ++j;
      }
      out += fraction ? "0.5" : "0";
      i = j;
      continue;
    }
    in_string = c == '"';
    out.push_back(c);
    ++i;
  }
  return out;
}

bool valid(simdjson::dom::element e, int n) {
  if (n < 0) return true;
  const JsonSchemaNode& node = schema().nodes[static_cast<size_t>(n)];
  if (node.types == 0) return true;
  using T = simdjson::dom::element_type;
  switch (e.type()) {
    case T::STRING: {
      if ((node.types & JsonSchemaNode::kString) == 0) return false;
      if (node.enum_strings.empty()) return true;
      const std::string body =
          dsv41::sampling::json_string_body(std::string(e.get_string().value()));
      for (const std::string& v : node.enum_strings)
        if (v == body) return true;
      return false;
    }
    case T::INT64:
    case T::UINT64:
      return (node.types & (JsonSchemaNode::kInteger | JsonSchemaNode::kNumber)) != 0;
    case T::DOUBLE:
      return (node.types & JsonSchemaNode::kNumber) != 0;
    case T::BOOL:
      return (node.types & JsonSchemaNode::kBoolean) != 0;
    case T::NULL_VALUE:
      return (node.types & JsonSchemaNode::kNull) != 0;
    case T::ARRAY: {
      if ((node.types & JsonSchemaNode::kArray) == 0) return false;
      if (node.any_array) return true;
      int64_t count = 0;
      const simdjson::dom::array items = e.get_array().value();  // the loop needs an lvalue
      for (simdjson::dom::element item : items) {
        if (!valid(item, node.items)) return false;
        ++count;
      }
      return count >= node.min_items && (node.max_items < 0 || count <= node.max_items);
    }
    case T::OBJECT: {
      if ((node.types & JsonSchemaNode::kObject) == 0) return false;
      if (node.any_object) return true;
      uint64_t seen = 0;
      const simdjson::dom::object fields = e.get_object().value();
      for (auto field : fields) {
        const std::string body = dsv41::sampling::json_string_body(std::string(field.key));
        size_t i = 0;
        while (i < node.keys.size() && node.keys[i] != body) ++i;
        if (i == node.keys.size() || (seen >> i & 1) != 0) return false;
        seen |= uint64_t{1} << i;
        if (!valid(field.value, node.key_nodes[i])) return false;
      }
      return (seen & node.required) == node.required;
    }
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsv41::sampling::JsonGrammar g;
  dsv41::sampling::JsonSchemaTracker t(&schema());
  std::string taken;
  for (size_t i = 0; i < size; ++i) {
    dsv41::sampling::JsonGrammar g2 = g;
    if (!g2.feed(data[i])) continue;
    const std::bitset<256> next = t.next_bytes();
    const dsv41::sampling::JsonSchemaTracker before = t;
    if (!t.feed(data[i])) {
      if (t.next_bytes() != before.next_bytes()) __builtin_trap();
      continue;
    }
    if (!next.test(data[i])) __builtin_trap();
    g = g2;
    taken.push_back(static_cast<char>(data[i]));
    if (g.complete()) break;
  }
  if (!g.complete()) return 0;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(normalise_numbers(taken)).get(root)) __builtin_trap();
  if (!valid(root, 0)) __builtin_trap();
  return 0;
}
