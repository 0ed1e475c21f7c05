// Minimal leveled logging to stderr. The threshold comes from the DSV41_LOG_LEVEL tunable and is
// held by a Logger owned by whoever loads a model (no process-global mutable state).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace dsv41 {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// "debug"|"info"|"warn"|"error"; anything else -> kInfo.
LogLevel parse_log_level(std::string_view s);

class Logger {
 public:
  explicit Logger(LogLevel threshold = LogLevel::kInfo) : threshold_(threshold) {}
  bool enabled(LogLevel l) const { return l >= threshold_; }
  void write(LogLevel l, std::string_view message) const;
  template <typename... A>
  void log(LogLevel l, fmt::format_string<A...> f, A&&... a) const {
    if (enabled(l)) write(l, fmt::format(f, std::forward<A>(a)...));
  }

 private:
  LogLevel threshold_;
};

}  // namespace dsv41
