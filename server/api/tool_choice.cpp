// tool_choice_constraint (see tool_choice.hpp).
#include "api/tool_choice.hpp"

#include "api/token_vocabulary.hpp"
#include "core/check.hpp"
#include "sampling/tool_call_constraint.hpp"

namespace dsv41::server {

std::shared_ptr<TokenConstraint> tool_choice_constraint(GenerationBackend& backend,
                                                        const chat::ChatRequest& request,
                                                        const chat::ResolvedOptions& resolved) {
  using chat::ToolChoiceKind;
  if (resolved.tool_choice != ToolChoiceKind::kRequired &&
      resolved.tool_choice != ToolChoiceKind::kNamed)
    return nullptr;
  sampling::ToolCallGrammarSpec spec;
  spec.close_think = resolved.thinking;
  if (resolved.tool_choice == ToolChoiceKind::kNamed) {
    spec.names.push_back(resolved.tool_choice_name);
  } else {
    for (const auto& t : request.tools) spec.names.push_back(t.name);
  }
  DSV41_CHECK(!spec.names.empty(), kInvalidArgument,
              "tool_choice: requires a tool call but the request has no tools");
  return std::make_shared<sampling::ToolCallConstraint>(token_vocabulary(backend), std::move(spec));
}

}  // namespace dsv41::server
