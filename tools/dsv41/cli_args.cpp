// Args parsing and the subcommand registry.
#include "cli_args.hpp"

#include <cerrno>
#include <cstdlib>

namespace dsv41::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace

Registration::Registration(Command c) { registry().push_back(c); }
const std::vector<Command>& commands() { return registry(); }

Args::Args(int argc, char** argv, int start) {
  for (int i = start; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() < 3 || a.rfind("--", 0) != 0)
      throw UsageError("unexpected argument '" + a + "' (flags are --name [value])");
    std::string name = a.substr(2);
    if (values_.count(name)) throw UsageError("--" + name + " given twice");
    if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      values_[name] = std::string(argv[++i]);
    } else {
      values_[name] = std::nullopt;
    }
  }
}

void Args::allow(std::initializer_list<const char*> known) const {
  for (const auto& [name, v] : values_) {
    bool ok = false;
    for (const char* k : known) ok = ok || name == k;
    if (!ok) throw UsageError("unknown flag --" + name);
  }
}

bool Args::flag(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  if (it->second.has_value()) throw UsageError("--" + name + " takes no value");
  return true;
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  if (!it->second.has_value()) throw UsageError("--" + name + " needs a value");
  return it->second;
}

std::string Args::require(const std::string& name) const {
  auto v = get(name);
  if (!v) throw UsageError("missing required flag --" + name);
  return *v;
}

int64_t Args::get_int(const std::string& name, int64_t fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0)
    throw UsageError("--" + name + " expects an integer, got '" + *v + "'");
  return x;
}

double Args::get_float(const std::string& name, double fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0')
    throw UsageError("--" + name + " expects a number, got '" + *v + "'");
  return x;
}

std::vector<int32_t> Args::parse_ids(const std::string& flag, const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  if (text.empty()) throw UsageError("--" + flag + " is empty");
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos
                                                                     : comma - pos);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
      throw UsageError("--" + flag + ": '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

}  // namespace dsv41::cli
