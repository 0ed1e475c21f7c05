// The Spark checkpoint's expert allocation plan `exl3/plan/<name>.json` (spec exl3-format.md
// §4.4): per-layer default state, keep_native experts, per-expert overrides and the bank roots.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dsv41::exl3 {

constexpr int kNativeState = 0;  // state_bits() of "native": the release FP4 expert is used

struct AllocationPlan {
  std::string path;                                        // for messages
  std::map<int, std::string> layers;                       // L -> default state ("K3")
  std::map<int, std::set<int>> keep_native;                // L -> experts kept native
  std::map<int, std::map<int, std::string>> expert_state;  // L -> E -> state (applied last)
  std::vector<std::string> qdir;                           // bank roots in precedence order

  // Throws detail::Failure naming the file and the field: unreadable file, bad JSON, missing
  // `layers`/`qdir`, a non-integer layer/expert key, a state that is neither "K<1..8>" nor
  // "native", overrides for a layer absent from `layers`, an empty qdir entry.
  static AllocationPlan load(const std::string& path);
  static AllocationPlan parse(std::string_view json, const std::string& origin);

  bool covers(int layer) const { return layers.count(layer) != 0; }
  // layers[L], then keep_native -> "native", then expert_state (the loader's `_states`).
  // Precondition: covers(layer).
  std::string state(int layer, int expert) const;
};

// The plan file of a Spark model directory (spec §4.2: `<model>/exl3/plan/<name>.json`).
// `choice` empty: the only *.json in <model>/exl3/plan, nullopt when that directory does not exist
// (not a Spark checkpoint); several plans throw kInvalidArgument listing them. `choice` set: a
// plan name under exl3/plan ("J268-ho-v31-K5n" or "J268-ho-v31-K5n.json") or a file path; one
// that does not exist throws kNotFound naming both places looked at.
std::optional<std::string> find_plan_file(const std::string& model_dir, const std::string& choice);

// "K5" -> 5, "native" -> kNativeState; anything else throws naming `what`.
int state_bits(const std::string& state, const std::string& what);

}  // namespace dsv41::exl3
