// The one error shape of the server, {"error": {"message", "type", "param", "code"}} with `code` the
// HTTP status as an integer (vLLM's ErrorInfo), and the Status → HTTP mapping
// (api-and-clients.md §2.10).
#pragma once

#include <string>
#include <string_view>

#include "dsv41/status.hpp"
#include "http/http_types.hpp"

namespace dsv41::server {

// "invalid_request_error" (400, 413), "authentication_error" (401), "not_found_error" (404, 405),
// "server_error" (503), "internal_server_error" (500).
const char* error_type_for(int status);

std::string error_json(int status, std::string_view message, std::string_view param = {});
HttpResponse error_response(int status, std::string_view message, std::string_view param = {});

// kInvalidArgument / kContextOverflow / kUnsupported → 400, kNotFound → 404, kOutOfMemory (queue or
// state budget full) and kAborted (shutting down) → 503 with Retry-After, anything else → 500.
int http_status_for(ErrorCode code);
HttpResponse error_response(const Status& status, std::string_view param = {});

// The field a validation message names: the text before the first ": " when it looks like a
// field path ("messages[2].content: expected ..." → "messages[2].content"), else "".
std::string param_of(std::string_view message);

}  // namespace dsv41::server
