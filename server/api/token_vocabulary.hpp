// The vocabulary table the output constraints scan (every id's decoded text, the end-of-turn id,
// a tokenizer for forced literals): built once per backend on the first constrained request,
// kept in the backend (GenerationBackend::vocabulary_cache) and shared by all its requests
// (tool_choice.cpp, response_format.cpp). A process-wide cache keyed by the backend's address
// could hand a new backend at a reused address the old one's table.
#pragma once

#include <memory>

#include "api/generation_backend.hpp"
#include "sampling/tool_call_constraint.hpp"

namespace dsv41::server {

// Throws kInternal when the end-of-sentence marker is not one token of the vocabulary.
std::shared_ptr<const sampling::TokenVocabulary> token_vocabulary(GenerationBackend& backend);

}  // namespace dsv41::server
