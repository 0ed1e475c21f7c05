// tool_choice_constraint (see tool_choice.hpp). The vocabulary table (every id's decoded text)
// is built once per backend and shared by all constrained requests.
#include "api/tool_choice.hpp"

#include <mutex>

#include "chat/markers.hpp"
#include "core/check.hpp"
#include "sampling/tool_call_constraint.hpp"

namespace dsv41::server {

namespace {

std::shared_ptr<const sampling::TokenVocabulary> vocabulary(GenerationBackend& backend) {
  static std::mutex mu;
  static GenerationBackend* owner = nullptr;
  static std::shared_ptr<const sampling::TokenVocabulary> cached;
  std::lock_guard<std::mutex> lock(mu);
  if (owner == &backend && cached) return cached;
  auto v = std::make_shared<sampling::TokenVocabulary>();
  const int64_t n = backend.vocab_size();
  v->bytes.resize(static_cast<size_t>(n));
  for (int64_t id = 0; id < n; ++id) {
    const int32_t t = static_cast<int32_t>(id);
    Result<std::string> text = backend.detokenize(std::span<const int32_t>(&t, 1));
    if (text) v->bytes[static_cast<size_t>(id)] = std::move(*text);
  }
  Result<std::vector<int32_t>> eos = backend.tokenize(chat::markers::kEos, /*special=*/true);
  DSV41_CHECK(eos && eos->size() == 1, kInternal,
              "tool_choice: the end-of-sentence marker is not one token in this vocabulary");
  v->end_of_turn = (*eos)[0];
  // The backend owns the engine that runs every request holding this function.
  GenerationBackend* b = &backend;
  v->tokenize = [b](std::string_view literal) {
    Result<std::vector<int32_t>> ids = b->tokenize(literal, /*special=*/true);
    DSV41_CHECK(ids, kInternal, "tool_choice: cannot tokenize a forced literal");
    return std::move(*ids);
  };
  owner = &backend;
  cached = std::move(v);
  return cached;
}

}  // namespace

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
  return std::make_shared<sampling::ToolCallConstraint>(vocabulary(backend), std::move(spec));
}

}  // namespace dsv41::server
