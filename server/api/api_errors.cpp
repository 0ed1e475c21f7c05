#include "api/api_errors.hpp"

#include <cctype>

#include "core/json_writer.hpp"

namespace dsv41::server {

// Seconds a client should wait before retrying an overloaded server (OpenAI SDKs honour it).
constexpr const char* kRetryAfterSeconds = "1";

const char* error_type_for(int status) {
  switch (status) {
    case 400:
    case 413:
    case 431: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404:
    case 405: return "not_found_error";
    case 429:
    case 503: return "server_error";
    default: return "internal_server_error";
  }
}

std::string error_json(int status, std::string_view message, std::string_view param) {
  json::Writer w;
  w.begin_object().key("error").begin_object();
  w.key("message").value(message);
  w.key("type").value(error_type_for(status));
  w.key("param");
  if (param.empty()) {
    w.null();
  } else {
    w.value(param);
  }
  w.key("code").value(int64_t(status));
  w.end_object().end_object();
  return w.take();
}

HttpResponse error_response(int status, std::string_view message, std::string_view param) {
  HttpResponse r;
  r.status = status;
  r.body = error_json(status, message, param);
  if (status == 429 || status == 503) r.headers.emplace_back("Retry-After", kRetryAfterSeconds);
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

int http_status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kContextOverflow:
    case ErrorCode::kUnsupported: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kOutOfMemory:
    case ErrorCode::kAborted: return 503;
    default: return 500;
  }
}

HttpResponse error_response(const Status& status, std::string_view param) {
  std::string p(param);
  if (p.empty() && http_status_for(status.code()) == 400) p = param_of(status.message());
  return error_response(http_status_for(status.code()), status.message(), p);
}

std::string param_of(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos || colon == 0) return {};
  std::string_view head = message.substr(0, colon);
  for (char c : head) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                    c == '[' || c == ']';
    if (!ok) return {};
  }
  return std::string(head);
}

}  // namespace dsv41::server
