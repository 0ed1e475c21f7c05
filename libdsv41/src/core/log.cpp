// Logger: one line per message, "dsv41 <level>: <message>".
#include "core/log.hpp"

#include <cstdio>

namespace dsv41 {

LogLevel parse_log_level(std::string_view s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warn") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

void Logger::write(LogLevel l, std::string_view message) const {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  std::fprintf(stderr, "dsv41 %s: %.*s\n", kNames[static_cast<int>(l)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace dsv41
