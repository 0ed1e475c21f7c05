// compile_json_schema (see json_schema.hpp).
#include "sampling/json_schema.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <map>
#include <set>

#include "core/check.hpp"
#include "core/json_writer.hpp"

namespace dsv41::sampling {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Keywords that only describe: read past.
const std::set<std::string_view> kAnnotations = {"title",    "description", "default",
                                                 "examples", "$schema",     "$id",
                                                 "$comment", "$defs",       "definitions"};

class Compiler {
 public:
  explicit Compiler(element root) : root_(root) {}

  std::shared_ptr<const JsonSchema> run() {
    auto s = std::make_shared<JsonSchema>();
    schema_ = s.get();
    const int r = compile(root_, "$");
    DSV41_CHECK(r == 0 && schema_->nodes[0].types == JsonSchemaNode::kObject, kUnsupported,
                "response_format schema: the root must be an object schema (type \"object\")");
    return s;
  }

 private:
  int new_node() {
    schema_->nodes.emplace_back();
    return static_cast<int>(schema_->nodes.size()) - 1;
  }

  static uint8_t type_bit(std::string_view t, const std::string& path) {
    if (t == "string") return JsonSchemaNode::kString;
    if (t == "number") return JsonSchemaNode::kNumber;
    if (t == "integer") return JsonSchemaNode::kInteger;
    if (t == "boolean") return JsonSchemaNode::kBoolean;
    if (t == "null") return JsonSchemaNode::kNull;
    if (t == "object") return JsonSchemaNode::kObject;
    if (t == "array") return JsonSchemaNode::kArray;
    DSV41_FAIL(kInvalidArgument, "response_format schema: {}.type: unknown type '{}'", path, t);
  }

  // A number and an integer begin alike: their union is a number.
  static uint8_t normalise(uint8_t types) {
    if ((types & JsonSchemaNode::kNumber) != 0)
      types = static_cast<uint8_t>(types & ~JsonSchemaNode::kInteger);
    return types;
  }
  // The types as the first byte of a value tells them apart (an integer looks like a number).
  static uint8_t first_byte_classes(uint8_t types) {
    if ((types & JsonSchemaNode::kInteger) != 0)
      types = static_cast<uint8_t>((types & ~JsonSchemaNode::kInteger) | JsonSchemaNode::kNumber);
    return types;
  }

  int resolve_ref(std::string_view ref, const std::string& path) {
    std::string_view name;
    std::string_view section;
    for (std::string_view prefix : {"#/$defs/", "#/definitions/"}) {
      if (ref.substr(0, prefix.size()) == prefix) {
        name = ref.substr(prefix.size());
        section = prefix.substr(2, prefix.size() - 3);
      }
    }
    DSV41_CHECK(!name.empty() && name.find('/') == std::string_view::npos, kUnsupported,
                "response_format schema: {}.$ref '{}': only #/$defs/NAME and "
                "#/definitions/NAME are followed",
                path, ref);
    const std::string key = std::string(ref);
    if (auto it = refs_.find(key); it != refs_.end()) return it->second;
    element target;
    DSV41_CHECK(root_[section][name].get(target) == simdjson::SUCCESS, kInvalidArgument,
                "response_format schema: {}.$ref '{}' names no definition", path, ref);
    // Recursive references find the index before the body is compiled.
    const int n = new_node();
    refs_[key] = n;
    compile_into(n, target, fmt::format("{}/{}", section, name));
    return n;
  }

  int compile(element e, const std::string& path) {
    simdjson::dom::object o;
    if (e.is_bool()) {
      DSV41_CHECK(e.get_bool().value(), kUnsupported,
                  "response_format schema: {} is false (no value allowed)", path);
      return new_node();  // true: any value
    }
    DSV41_CHECK(e.get(o) == simdjson::SUCCESS, kInvalidArgument,
                "response_format schema: {} must be an object", path);
    std::string_view ref;
    if (o["$ref"].get(ref) == simdjson::SUCCESS) {
      for (auto field : o)
        DSV41_CHECK(field.key == "$ref" || kAnnotations.count(field.key) != 0, kUnsupported,
                    "response_format schema: {}.{} beside $ref is not enforced", path, field.key);
      return resolve_ref(ref, path);
    }
    const int n = new_node();
    compile_into(n, e, path);
    return n;
  }

  void compile_into(int n, element e, const std::string& path) {
    simdjson::dom::object o;
    if (e.is_bool()) return;  // true: any value
    DSV41_CHECK(e.get(o) == simdjson::SUCCESS, kInvalidArgument,
                "response_format schema: {} must be an object", path);
    uint8_t types = 0;
    bool any_of = false;
    for (auto field : o) {
      const std::string_view k = field.key;
      if (kAnnotations.count(k) != 0) continue;
      if (k == "type") {
        std::string_view t;
        simdjson::dom::array list;
        if (field.value.get(t) == simdjson::SUCCESS) {
          types |= type_bit(t, path);
        } else if (field.value.get(list) == simdjson::SUCCESS) {
          for (element x : list) {
            DSV41_CHECK(x.get(t) == simdjson::SUCCESS, kInvalidArgument,
                        "response_format schema: {}.type: entries must be strings", path);
            types |= type_bit(t, path);
          }
        } else {
          DSV41_FAIL(kInvalidArgument, "response_format schema: {}.type must be a string or a list",
                     path);
        }
      } else if (k == "anyOf") {
        any_of = true;
      } else if (k != "properties" && k != "required" && k != "additionalProperties" &&
                 k != "items" && k != "minItems" && k != "maxItems" && k != "enum" &&
                 k != "const") {
        DSV41_FAIL(kUnsupported, "response_format schema: {}.{} is not enforced", path, k);
      }
    }
    if (any_of) {
      DSV41_CHECK(types == 0, kUnsupported,
                  "response_format schema: {}: anyOf beside type is not enforced", path);
      merge_any_of(n, o["anyOf"], path);
      return;
    }
    // enum / const imply a string when no type is given.
    if (types == 0 &&
        (o["enum"].error() == simdjson::SUCCESS || o["const"].error() == simdjson::SUCCESS))
      types = JsonSchemaNode::kString;
    schema_->nodes[n].types = normalise(types);
    if ((types & JsonSchemaNode::kObject) != 0) object_part(n, o, path);
    if ((types & JsonSchemaNode::kArray) != 0) array_part(n, o, path);
    if ((types & JsonSchemaNode::kString) != 0) string_part(n, o, path);
  }

  // anyOf of branches with disjoint types: one node holding each branch's part.
  void merge_any_of(int n, simdjson::simdjson_result<element> list, const std::string& path) {
    simdjson::dom::array branches;
    DSV41_CHECK(list.get(branches) == simdjson::SUCCESS, kInvalidArgument,
                "response_format schema: {}.anyOf must be a list", path);
    size_t i = 0;
    for (element b : branches) {
      const std::string bp = fmt::format("{}.anyOf[{}]", path, i++);
      const JsonSchemaNode part = schema_->nodes[static_cast<size_t>(compile(b, bp))];
      JsonSchemaNode& node = schema_->nodes[static_cast<size_t>(n)];
      DSV41_CHECK(
          part.types != 0 && (first_byte_classes(node.types) & first_byte_classes(part.types)) == 0,
          kUnsupported,
          "response_format schema: {}: anyOf branches must have different types (the "
          "first byte of the value picks the branch)",
          bp);
      node.types |= part.types;
      if ((part.types & JsonSchemaNode::kObject) != 0) {
        node.keys = part.keys, node.key_nodes = part.key_nodes, node.required = part.required;
        node.any_object = part.any_object;
      }
      if ((part.types & JsonSchemaNode::kArray) != 0) {
        node.items = part.items, node.min_items = part.min_items, node.max_items = part.max_items;
        node.any_array = part.any_array;
      }
      if ((part.types & JsonSchemaNode::kString) != 0) node.enum_strings = part.enum_strings;
    }
  }

  void object_part(int n, simdjson::dom::object o, const std::string& path) {
    simdjson::dom::object props;
    if (o["properties"].get(props) != simdjson::SUCCESS) return;  // any object
    std::vector<std::string> names;
    std::vector<int> nodes;
    for (auto field : props) {
      DSV41_CHECK(names.size() < JsonSchema::kMaxKeys, kUnsupported,
                  "response_format schema: {}.properties: more than {} keys", path,
                  JsonSchema::kMaxKeys);
      names.emplace_back(field.key);
      nodes.push_back(compile(field.value, fmt::format("{}.properties.{}", path, field.key)));
    }
    uint64_t required = 0;
    simdjson::dom::array req;
    if (o["required"].get(req) == simdjson::SUCCESS) {
      for (element r : req) {
        std::string_view name;
        DSV41_CHECK(r.get(name) == simdjson::SUCCESS, kInvalidArgument,
                    "response_format schema: {}.required: entries must be strings", path);
        size_t i = 0;
        while (i < names.size() && names[i] != name) ++i;
        DSV41_CHECK(i < names.size(), kUnsupported,
                    "response_format schema: {}.required: '{}' is not in properties (keys come "
                    "only from properties)",
                    path, name);
        required |= uint64_t{1} << i;
      }
    }
    JsonSchemaNode& node = schema_->nodes[static_cast<size_t>(n)];
    node.any_object = false;
    node.required = required;
    node.key_nodes = std::move(nodes);
    for (const std::string& name : names) {
      node.keys.push_back(json_string_body(name));
      DSV41_CHECK(node.keys.back().size() <= JsonSchema::kMaxStringBytes, kUnsupported,
                  "response_format schema: {}.properties: a key longer than {} bytes", path,
                  JsonSchema::kMaxStringBytes);
    }
  }

  void array_part(int n, simdjson::dom::object o, const std::string& path) {
    int64_t lo = 0, hi = -1;
    if (o["minItems"].error() == simdjson::SUCCESS)
      DSV41_CHECK(o["minItems"].get(lo) == simdjson::SUCCESS && lo >= 0, kInvalidArgument,
                  "response_format schema: {}.minItems must be an integer >= 0", path);
    if (o["maxItems"].error() == simdjson::SUCCESS)
      DSV41_CHECK(o["maxItems"].get(hi) == simdjson::SUCCESS && hi >= lo, kInvalidArgument,
                  "response_format schema: {}.maxItems must be an integer >= minItems", path);
    element items;
    const bool has_items = o["items"].get(items) == simdjson::SUCCESS;
    const int item_node = has_items ? compile(items, path + ".items") : -1;
    JsonSchemaNode& node = schema_->nodes[static_cast<size_t>(n)];
    node.min_items = lo, node.max_items = hi;
    node.items = item_node;
    node.any_array = !has_items && lo == 0 && hi < 0;
  }

  void string_part(int n, simdjson::dom::object o, const std::string& path) {
    std::vector<std::string> values;
    auto add = [&](element v, const std::string& where) {
      std::string_view s;
      DSV41_CHECK(v.get(s) == simdjson::SUCCESS, kUnsupported,
                  "response_format schema: {}: only string values are enforced", where);
      DSV41_CHECK(values.size() < JsonSchema::kMaxEnum, kUnsupported,
                  "response_format schema: {}: more than {} values", where, JsonSchema::kMaxEnum);
      values.push_back(json_string_body(s));
      DSV41_CHECK(values.back().size() <= JsonSchema::kMaxStringBytes, kUnsupported,
                  "response_format schema: {}: a value longer than {} bytes", where,
                  JsonSchema::kMaxStringBytes);
    };
    simdjson::dom::array list;
    element c;
    if (o["enum"].get(list) == simdjson::SUCCESS) {
      for (element v : list) add(v, path + ".enum");
      DSV41_CHECK(!values.empty(), kInvalidArgument, "response_format schema: {}.enum is empty",
                  path);
    } else if (o["const"].get(c) == simdjson::SUCCESS) {
      add(c, path + ".const");
    }
    schema_->nodes[static_cast<size_t>(n)].enum_strings = std::move(values);
  }

  element root_;
  JsonSchema* schema_ = nullptr;
  std::map<std::string, int> refs_;
};

}  // namespace

std::string json_string_body(std::string_view s) {
  std::string out;
  json::append_string_body(out, s);
  return out;
}

Result<std::shared_ptr<const JsonSchema>> compile_json_schema(std::string_view schema_json) {
  std::shared_ptr<const JsonSchema> out;
  Status st = detail::capture_status([&] {
    simdjson::dom::parser parser;
    element root;
    const simdjson::padded_string text(schema_json);
    DSV41_CHECK(parser.parse(text).get(root) == simdjson::SUCCESS, kInvalidArgument,
                "response_format schema: not valid JSON");
    out = Compiler(root).run();
  });
  if (!st.is_ok()) return st;
  return out;
}

}  // namespace dsv41::sampling
