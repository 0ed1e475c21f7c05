// Constrained tool_choice (required / named) for the chat route: the per-request
// ToolCallConstraint over the backend's vocabulary (docs/server.md, docs/sampling.md).
#pragma once

#include <memory>

#include "api/generation_backend.hpp"
#include "chat/options.hpp"
#include "chat/request_json.hpp"
#include "dsv41/engine.hpp"

namespace dsv41::server {

// Null for auto / none; for required the allowed names are every tool's, for named that one.
// Throws kInvalidArgument naming `tool_choice` / `tools` for a choice that cannot be forced.
std::shared_ptr<TokenConstraint> tool_choice_constraint(GenerationBackend& backend,
                                                        const chat::ChatRequest& request,
                                                        const chat::ResolvedOptions& resolved);

}  // namespace dsv41::server
