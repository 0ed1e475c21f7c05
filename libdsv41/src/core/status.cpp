// Status helpers: code names and printable form.
#include "dsv41/status.hpp"

namespace dsv41 {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kCorruptFile: return "corrupt_file";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kIo: return "io_error";
    case ErrorCode::kOutOfMemory: return "out_of_memory";
    case ErrorCode::kContextOverflow: return "context_overflow";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kAborted: return "aborted";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace dsv41
