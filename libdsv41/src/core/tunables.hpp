// The one registry of every tunable and debug switch (name, type, default, doc). Values are read
// once from the environment (DSV41_* variables) into a Tunables object; nothing else calls getenv.
// The table lives in tunables_table.cpp; docs/env_vars.md is generated from it (`dsv41 tunables`).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "dsv41/status.hpp"

namespace dsv41 {

enum class TunableType { kInt, kFloat, kBool, kString };

struct TunableSpec {
  const char* name;           // environment variable, e.g. "DSV41_THREADS"
  TunableType type;
  const char* default_value;  // textual default, parsed like an environment value
  const char* doc;            // one line: meaning, unit, range
};

// Every registered tunable, in table order.
std::span<const TunableSpec> tunable_specs();

class Tunables {
 public:
  // All defaults.
  Tunables();
  // Defaults overridden by the registered DSV41_* variables of the environment. Unknown DSV41_*
  // variables and unparsable values are reported in *warnings (values keep their defaults).
  static Tunables from_environment(std::vector<std::string>* warnings = nullptr);

  // Overrides one value (e.g. from a command-line flag); error names the tunable and the value.
  Status set(const std::string& name, const std::string& value);

  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;

  // Markdown table of all tunables (docs/env_vars.md).
  static std::string markdown();

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace dsv41
