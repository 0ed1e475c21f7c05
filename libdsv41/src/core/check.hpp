// Internal error reporting: DSV41_CHECK throws detail::Failure (code + message + file:line);
// public entry points catch it with capture_status() and return a Status. See docs/architecture.md.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <string>

#include "dsv41/status.hpp"

namespace dsv41::detail {

class Failure : public std::exception {
 public:
  Failure(ErrorCode code, std::string message, const char* file, int line)
      : code_(code), message_(std::move(message)), file_(file), line_(line) {}
  const char* what() const noexcept override { return message_.c_str(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* file() const { return file_; }
  int line() const { return line_; }
  Status to_status() const { return Status(code_, message_); }

 private:
  ErrorCode code_;
  std::string message_;
  const char* file_;
  int line_;
};

[[noreturn]] inline void fail(ErrorCode code, std::string message, const char* file, int line) {
  throw Failure(code, std::move(message), file, line);
}

// Back from a public call to the internal convention: a failed Status / Result throws its code and
// message (for internal code built on the public API, e.g. speculative/).
inline void throw_if_error(const Status& s, const char* file, int line) {
  if (!s.is_ok()) throw Failure(s.code(), s.message(), file, line);
}
template <typename T>
T take(Result<T>&& r, const char* file, int line) {
  throw_if_error(r.status(), file, line);
  return std::move(r).value();
}

// Runs fn(); converts Failure / std::bad_alloc / any std::exception into a Status.
template <typename Fn>
Status capture_status(Fn&& fn) noexcept {
  try {
    fn();
    return Status::ok();
  } catch (const Failure& f) {
    return f.to_status();
  } catch (const std::bad_alloc&) {
    return Status(ErrorCode::kOutOfMemory, "out of host memory");
  } catch (const std::exception& e) {
    return Status(ErrorCode::kInternal, e.what());
  } catch (...) {
    return Status(ErrorCode::kInternal, "unknown exception");
  }
}

}  // namespace dsv41::detail

// DSV41_CHECK(cond, code, "fmt {}", args...): on failure throws Failure(code, formatted message).
#define DSV41_CHECK(cond, code, ...)                                                        \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::dsv41::detail::fail(::dsv41::ErrorCode::code, ::fmt::format(__VA_ARGS__), __FILE__, \
                            __LINE__);                                                      \
  } while (0)

// DSV41_TRY(status) / DSV41_TAKE(result): throw a failed public Status / Result as a Failure.
#define DSV41_TRY(status) ::dsv41::detail::throw_if_error((status), __FILE__, __LINE__)
#define DSV41_TAKE(result) ::dsv41::detail::take((result), __FILE__, __LINE__)

#define DSV41_FAIL(code, ...) \
  ::dsv41::detail::fail(::dsv41::ErrorCode::code, ::fmt::format(__VA_ARGS__), __FILE__, __LINE__)
