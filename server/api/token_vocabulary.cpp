// token_vocabulary (see token_vocabulary.hpp).
#include "api/token_vocabulary.hpp"

#include <mutex>

#include "chat/markers.hpp"
#include "core/check.hpp"

namespace dsv41::server {

std::shared_ptr<const sampling::TokenVocabulary> token_vocabulary(GenerationBackend& backend) {
  GenerationBackend::VocabularyCache& cache = backend.vocabulary_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  if (cache.table) return cache.table;
  auto v = std::make_shared<sampling::TokenVocabulary>();
  const int64_t n = backend.vocab_size();
  v->bytes.resize(static_cast<size_t>(n));
  for (int64_t id = 0; id < n; ++id) {
    const int32_t t = static_cast<int32_t>(id);
    Result<std::string> text = backend.detokenize(std::span<const int32_t>(&t, 1));
    if (text) v->bytes[static_cast<size_t>(id)] = std::move(*text);
  }
  Result<std::vector<int32_t>> eos = backend.tokenize(chat::markers::kEos, /*special=*/true);
  DSV41_CHECK(
      eos && eos->size() == 1, kInternal,
      "constrained decoding: the end-of-sentence marker is not one token in this vocabulary");
  v->end_of_turn = (*eos)[0];
  // The backend owns the engine that runs every request holding this function.
  GenerationBackend* b = &backend;
  v->tokenize = [b](std::string_view literal) {
    Result<std::vector<int32_t>> ids = b->tokenize(literal, /*special=*/true);
    DSV41_CHECK(ids, kInternal, "constrained decoding: cannot tokenize a forced literal");
    return std::move(*ids);
  };
  cache.table = std::move(v);
  return cache.table;
}

}  // namespace dsv41::server
