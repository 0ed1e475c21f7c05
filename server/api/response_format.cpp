// response_format_constraint (see response_format.hpp).
#include "api/response_format.hpp"

#include <string>

#include "api/token_vocabulary.hpp"
#include "chat/markers.hpp"
#include "core/check.hpp"
#include "sampling/json_constraint.hpp"

namespace dsv41::server {

std::shared_ptr<TokenConstraint> response_format_constraint(GenerationBackend& backend,
                                                            const chat::ChatRequest& request,
                                                            const chat::ResolvedOptions& resolved) {
  if (request.options.response_format == chat::ResponseFormat::kText || !request.tools.empty())
    return nullptr;
  int32_t think_end = -1;
  if (resolved.thinking) {
    Result<std::vector<int32_t>> ids = backend.tokenize(chat::markers::kThinkEnd, true);
    DSV41_CHECK(ids && ids->size() == 1, kInternal,
                "response_format: the think-end marker is not one token in this vocabulary");
    think_end = (*ids)[0];
  }
  // Markers the chat output parser acts on never enter the object.
  std::vector<std::string> reserved = {"<｜", std::string(chat::markers::kDsml),
                                       std::string(chat::markers::kThinkStart),
                                       std::string(chat::markers::kThinkEnd)};
  return std::make_shared<sampling::JsonConstraint>(token_vocabulary(backend), think_end,
                                                    std::move(reserved));
}

}  // namespace dsv41::server
