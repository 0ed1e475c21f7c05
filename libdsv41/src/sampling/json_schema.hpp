// JsonSchema: the subset of JSON Schema that constrained decoding enforces (response_format
// json_schema, docs/sampling.md "JSON schema"), compiled from the schema's JSON text into nodes
// that JsonSchemaTracker walks byte by byte beside JsonGrammar.
//
// Enforced: `type` (string, number, integer, boolean, null, object, array, or a list of them),
// `properties` + `required` (keys only from `properties`, each at most once, every required key
// before the object closes; extra keys are never produced, which every schema allows whatever its
// `additionalProperties`), `items`, `minItems`, `maxItems`, string `enum` / `const`, `anyOf` whose
// branches have different types, and `$ref` to `#/$defs/...` or `#/definitions/...` (recursion
// allowed). An object without `properties`, an array without `items` and a schema without `type`
// take any JSON value of that kind. Ignored (annotations): title, description, default, examples,
// $schema, $id, $comment, $defs, definitions. Anything else (pattern, format, minimum,
// minLength, oneOf, allOf, not, ...) makes compile_json_schema fail with kUnsupported naming the
// keyword and where it is, so no caller believes it enforced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dsv41/status.hpp"

namespace dsv41::sampling {

struct JsonSchemaNode {
  enum Type : uint8_t {
    kString = 1,
    kNumber = 2,   // any JSON number
    kInteger = 4,  // -?(0|[1-9][0-9]*): no fraction, no exponent
    kBoolean = 8,
    kNull = 16,
    kObject = 32,
    kArray = 64,
  };
  uint8_t types = 0;  // 0: any JSON value
  // kObject: properties as their JSON string bodies (what sits between the quotes, escaped the
  // way a JSON encoder writes them), each one's node, required as bits. No properties: any object.
  std::vector<std::string> keys;
  std::vector<int> key_nodes;
  uint64_t required = 0;
  bool any_object = true;
  // kArray: the items' node (-1: any value) and the count bounds (max -1: none).
  int items = -1;
  int64_t min_items = 0, max_items = -1;
  bool any_array = true;
  // kString: allowed values as JSON string bodies (empty: any string).
  std::vector<std::string> enum_strings;
};

struct JsonSchema {
  static constexpr size_t kMaxKeys = 64;  // properties per object (a bit mask of seen keys)
  static constexpr size_t kMaxEnum = 64;  // string enum values
  static constexpr size_t kMaxStringBytes = 4096;  // of a key or an enum value (16-bit offsets)
  std::vector<JsonSchemaNode> nodes;               // nodes[0] is the root, an object
};

// The schema's JSON text (the request's response_format.json_schema.schema) compiled; the root
// must be an object schema. kInvalidArgument for text that is not JSON or a malformed schema,
// kUnsupported for keywords outside the subset, both naming the keyword and its JSON path.
Result<std::shared_ptr<const JsonSchema>> compile_json_schema(std::string_view schema_json);

// The JSON string body of `s` as a JSON encoder writes it (json::append_string_body: '"', '\\'
// and controls escaped, \b \f \n \r \t short forms, other controls \u00xx, the rest as is).
std::string json_string_body(std::string_view s);

}  // namespace dsv41::sampling
