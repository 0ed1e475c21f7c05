// Tunables: parsing and validation of registered values. The only getenv in the code base.
#include "core/tunables.hpp"

#include <cstdlib>
#include <cstring>

#include "core/check.hpp"

extern char** environ;

namespace dsv41 {

namespace {

const TunableSpec* find_spec(const std::string& name) {
  for (const auto& s : tunable_specs())
    if (name == s.name) return &s;
  return nullptr;
}

bool parse_int(const std::string& v, int64_t* out) {
  if (v.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = x;
  return true;
}

bool parse_float(const std::string& v, double* out) {
  if (v.empty()) return false;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (*end != '\0') return false;
  *out = x;
  return true;
}

bool parse_bool(const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return *out = true, true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return *out = false, true;
  return false;
}

bool valid_for(const TunableSpec& s, const std::string& v) {
  int64_t i;
  double d;
  bool b;
  switch (s.type) {
    case TunableType::kInt: return parse_int(v, &i);
    case TunableType::kFloat: return parse_float(v, &d);
    case TunableType::kBool: return parse_bool(v, &b);
    case TunableType::kString: return true;
  }
  return false;
}

const char* type_name(TunableType t) {
  switch (t) {
    case TunableType::kInt: return "int";
    case TunableType::kFloat: return "float";
    case TunableType::kBool: return "bool";
    case TunableType::kString: return "string";
  }
  return "?";
}

const std::string& lookup(const std::map<std::string, std::string>& m, const std::string& name,
                          TunableType want) {
  const TunableSpec* s = find_spec(name);
  DSV41_CHECK(s != nullptr, kInternal, "tunable {} is not registered", name);
  DSV41_CHECK(s->type == want, kInternal, "tunable {} is {}, read as {}", name, type_name(s->type),
              type_name(want));
  return m.at(name);
}

}  // namespace

Tunables::Tunables() {
  for (const auto& s : tunable_specs()) values_[s.name] = s.default_value;
}

Tunables Tunables::from_environment(std::vector<std::string>* warnings) {
  Tunables t;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr || std::strncmp(*e, "DSV41_", 6) != 0) continue;
    std::string name(*e, eq - *e), value(eq + 1);
    if (name == "DSV41_MODEL_DIR") continue;  // test-harness variable, documented in docs/testing.md
    const TunableSpec* s = find_spec(name);
    if (s == nullptr) {
      if (warnings) warnings->push_back(name + " is not a known DSV41_* tunable (ignored)");
      continue;
    }
    Status st = t.set(name, value);
    if (!st.is_ok() && warnings) warnings->push_back(st.message());
  }
  return t;
}

Status Tunables::set(const std::string& name, const std::string& value) {
  const TunableSpec* s = find_spec(name);
  if (s == nullptr) return Status(ErrorCode::kInvalidArgument, "unknown tunable " + name);
  if (!valid_for(*s, value))
    return Status(ErrorCode::kInvalidArgument,
                  name + "=" + value + " is not a valid " + type_name(s->type));
  values_[name] = value;
  return Status::ok();
}

int64_t Tunables::get_int(const std::string& name) const {
  int64_t v = 0;
  parse_int(lookup(values_, name, TunableType::kInt), &v);
  return v;
}

double Tunables::get_float(const std::string& name) const {
  double v = 0;
  parse_float(lookup(values_, name, TunableType::kFloat), &v);
  return v;
}

bool Tunables::get_bool(const std::string& name) const {
  bool v = false;
  parse_bool(lookup(values_, name, TunableType::kBool), &v);
  return v;
}

const std::string& Tunables::get_string(const std::string& name) const {
  return lookup(values_, name, TunableType::kString);
}

std::string Tunables::markdown() {
  std::string out = "| name | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& s : tunable_specs()) {
    out += std::string("| `") + s.name + "` | " + type_name(s.type) + " | `" + s.default_value +
           "` | " + s.doc + " |\n";
  }
  return out;
}

}  // namespace dsv41
