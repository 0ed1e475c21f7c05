// Constrained JSON output for the chat and completions routes: response_format json_object /
// json_schema gives the request a sampling::JsonConstraint over the backend's vocabulary
// (docs/server.md, docs/sampling.md "JSON output").
#pragma once

#include <memory>

#include "api/generation_backend.hpp"
#include "chat/options.hpp"
#include "chat/request_json.hpp"
#include "dsv41/engine.hpp"

namespace dsv41::server {

// The JSON-output constraint of options.response_format (null for text): think_end is the token
// that ends free reasoning, -1 when the object starts at the first token (/v1/completions).
std::shared_ptr<TokenConstraint> json_output_constraint(GenerationBackend& backend,
                                                        const chat::RequestOptions& options,
                                                        int32_t think_end);

// Null for response_format text (or absent) and for a request that has tools (a tool call is not
// a JSON answer; tool_choice none has already removed them). In thinking mode the reasoning comes
// first, unconstrained. Throws kInternal when the vocabulary lacks a single think-end token.
std::shared_ptr<TokenConstraint> response_format_constraint(GenerationBackend& backend,
                                                            const chat::ChatRequest& request,
                                                            const chat::ResolvedOptions& resolved);

}  // namespace dsv41::server
