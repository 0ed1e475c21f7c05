// Status, ErrorCode and Result<T>: how every fallible public call of libdsv41 reports failure.
// No exception crosses the public API; messages name the offending field, file or tensor.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dsv41 {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // a parameter or request field is out of range / malformed
  kNotFound,         // a file, tensor or key does not exist
  kCorruptFile,      // a file exists but its bytes violate the format
  kUnsupported,      // a valid input that this build cannot handle
  kIo,               // the OS refused a read/write/mmap
  kOutOfMemory,      // a pool or allocation budget is exhausted
  kContextOverflow,  // a sequence would exceed the maximum context
  kCancelled,        // the caller cancelled the request
  kAborted,          // a peer or the engine aborted (TP link loss, shutdown)
  kTimeout,          // a bounded wait ran out
  kInternal,         // a broken invariant: a bug in libdsv41
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "ok".
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// A value or a non-ok Status (C++20 has no std::expected).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must be non-ok

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dsv41
