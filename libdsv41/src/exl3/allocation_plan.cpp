// Plan JSON reader (schema reconstructed from the Spark loader st_exl3_moe.py, spec §4.4).
#include "exl3/allocation_plan.hpp"

#include <fmt/ranges.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include "core/check.hpp"

namespace dsv41::exl3 {

namespace {

int parse_index(std::string_view key, const std::string& origin, const char* field) {
  int v = -1;
  auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), v);
  DSV41_CHECK(ec == std::errc() && ptr == key.data() + key.size() && v >= 0, kCorruptFile,
              "{}: plan field '{}': key '{}' is not a non-negative integer", origin, field, key);
  return v;
}

std::string state_string(simdjson::dom::element e, const std::string& origin,
                         const std::string& where) {
  std::string_view s;
  DSV41_CHECK(!e.get_string().get(s), kCorruptFile, "{}: plan field '{}' must be a string", origin,
              where);
  std::string state(s);
  state_bits(state, origin + ": plan field '" + where + "'");
  return state;
}

// The (key, value) pairs of an object field; none when an optional field is absent.
std::vector<std::pair<std::string_view, simdjson::dom::element>> object_field(
    simdjson::dom::object root, const char* name, const std::string& origin, bool required) {
  std::vector<std::pair<std::string_view, simdjson::dom::element>> out;
  simdjson::dom::element e;
  if (root[name].get(e)) {
    DSV41_CHECK(!required, kCorruptFile, "{}: plan has no '{}' field", origin, name);
    return out;
  }
  simdjson::dom::object o;
  DSV41_CHECK(!e.get_object().get(o), kCorruptFile, "{}: plan field '{}' must be an object", origin,
              name);
  for (auto [key, value] : o) out.emplace_back(key, value);
  return out;
}

}  // namespace

std::optional<std::string> find_plan_file(const std::string& model_dir, const std::string& choice) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(model_dir) / "exl3" / "plan";
  if (!choice.empty()) {
    const fs::path named =
        dir / (fs::path(choice).extension() == ".json" ? choice : choice + ".json");
    if (choice.find('/') == std::string::npos && fs::is_regular_file(named)) return named.string();
    DSV41_CHECK(fs::is_regular_file(choice), kNotFound,
                "EXL3 plan '{}' (DSV41_EXL3_PLAN / --plan) is neither a file nor a plan in {}",
                choice, dir.string());
    return choice;
  }
  if (!fs::is_directory(dir)) return std::nullopt;
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  DSV41_CHECK(!found.empty(), kNotFound, "{}: no plan *.json (a Spark checkpoint has one)",
              dir.string());
  DSV41_CHECK(found.size() == 1, kInvalidArgument,
              "{}: {} plans ({}); choose one with DSV41_EXL3_PLAN (or --plan)", dir.string(),
              found.size(), fmt::join(found, ", "));
  return (dir / found[0]).string();
}

int state_bits(const std::string& state, const std::string& what) {
  if (state == "native") return kNativeState;
  int k = 0;
  const char* b = state.data() + 1;
  const char* e = state.data() + state.size();
  const bool ok =
      state.size() >= 2 && state[0] == 'K' && std::from_chars(b, e, k).ptr == e && k >= 1 && k <= 8;
  DSV41_CHECK(ok, kCorruptFile, "{}: state '{}' is neither 'K<1..8>' nor 'native'", what, state);
  return k;
}

std::string AllocationPlan::state(int layer, int expert) const {
  std::string s = layers.at(layer);
  if (auto it = keep_native.find(layer); it != keep_native.end() && it->second.count(expert))
    s = "native";
  if (auto it = expert_state.find(layer); it != expert_state.end()) {
    if (auto jt = it->second.find(expert); jt != it->second.end()) s = jt->second;
  }
  return s;
}

AllocationPlan AllocationPlan::load(const std::string& path) {
  simdjson::padded_string json;
  DSV41_CHECK(!simdjson::padded_string::load(path).get(json), kNotFound,
              "allocation plan {}: cannot read file", path);
  return parse(std::string_view(json.data(), json.size()), path);
}

AllocationPlan AllocationPlan::parse(std::string_view text, const std::string& origin) {
  simdjson::dom::parser parser;
  simdjson::dom::element root_el;
  auto err = parser.parse(text.data(), text.size()).get(root_el);
  DSV41_CHECK(!err, kCorruptFile, "{}: plan is not valid JSON ({})", origin,
              simdjson::error_message(err));
  simdjson::dom::object root;
  DSV41_CHECK(!root_el.get_object().get(root), kCorruptFile, "{}: plan is not a JSON object",
              origin);
  AllocationPlan plan;
  plan.path = origin;
  for (auto [key, value] : object_field(root, "layers", origin, true)) {
    const int l = parse_index(key, origin, "layers");
    plan.layers[l] = state_string(value, origin, fmt::format("layers.{}", key));
  }
  for (auto [key, value] : object_field(root, "keep_native", origin, false)) {
    const int l = parse_index(key, origin, "keep_native");
    simdjson::dom::array experts;
    DSV41_CHECK(!value.get_array().get(experts), kCorruptFile,
                "{}: plan field 'keep_native.{}' must be an array of expert ids", origin, key);
    for (simdjson::dom::element e : experts) {
      int64_t id = -1;
      DSV41_CHECK(!e.get_int64().get(id) && id >= 0, kCorruptFile,
                  "{}: plan field 'keep_native.{}' holds a non-integer or negative expert id",
                  origin, key);
      // 2^32 would otherwise become expert 0 (and pass the bank's expert-count check).
      DSV41_CHECK(id <= std::numeric_limits<int>::max(), kCorruptFile,
                  "{}: plan field 'keep_native.{}' holds expert id {}, past the int range", origin,
                  key, id);
      plan.keep_native[l].insert(static_cast<int>(id));
    }
  }
  for (auto [key, value] : object_field(root, "expert_state", origin, false)) {
    const int l = parse_index(key, origin, "expert_state");
    simdjson::dom::object per_expert;
    DSV41_CHECK(!value.get_object().get(per_expert), kCorruptFile,
                "{}: plan field 'expert_state.{}' must be an object", origin, key);
    for (auto [ekey, evalue] : per_expert) {
      const int e = parse_index(ekey, origin, "expert_state");
      plan.expert_state[l][e] =
          state_string(evalue, origin, fmt::format("expert_state.{}.{}", key, ekey));
    }
  }
  for (const auto& [l, unused] : plan.keep_native)
    DSV41_CHECK(plan.covers(l), kCorruptFile,
                "{}: plan field 'keep_native' names layer {} which is not in 'layers'", origin, l);
  for (const auto& [l, unused] : plan.expert_state)
    DSV41_CHECK(plan.covers(l), kCorruptFile,
                "{}: plan field 'expert_state' names layer {} which is not in 'layers'", origin, l);
  simdjson::dom::element q;
  std::string_view qdir;
  DSV41_CHECK(!root["qdir"].get(q) && !q.get_string().get(qdir), kCorruptFile,
              "{}: plan field 'qdir' (colon-separated bank roots) is missing or not a string",
              origin);
  size_t start = 0;
  while (true) {
    const size_t colon = qdir.find(':', start);
    const std::string_view entry = qdir.substr(
        start, colon == std::string_view::npos ? std::string_view::npos : colon - start);
    DSV41_CHECK(!entry.empty(), kCorruptFile, "{}: plan field 'qdir' ('{}') has an empty entry",
                origin, qdir);
    plan.qdir.emplace_back(entry);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return plan;
}

}  // namespace dsv41::exl3
