// Command-line plumbing of the dsv41 tool: `--name value` / `--flag` parsing with named errors,
// and the static registry of subcommands (each cmd_*.cpp registers its own).
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsv41::cli {

// A usage error: printed as one line, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // argv[start..argc): "--name value" pairs; "--name" followed by another "--x" or the end is a
  // boolean flag. Anything else is a UsageError naming it.
  Args(int argc, char** argv, int start);
  // Every given name must be in `known` (without the leading dashes).
  void allow(std::initializer_list<const char*> known) const;
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  bool flag(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::string require(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_float(const std::string& name, double fallback) const;
  // "0,17,5" -> ids; a bad element is a UsageError naming it.
  static std::vector<int32_t> parse_ids(const std::string& flag, const std::string& text);

 private:
  std::map<std::string, std::optional<std::string>> values_;
};

using CommandFn = int (*)(const Args&);

struct Command {
  const char* name;
  const char* usage;  // one line of flags, shown by `dsv41 help`
  const char* summary;
  CommandFn fn;
};

// Declared at namespace scope in a cmd_*.cpp: `static Registration reg{{"info", ..., &run}};`
struct Registration {
  explicit Registration(Command c);
};

const std::vector<Command>& commands();

}  // namespace dsv41::cli
