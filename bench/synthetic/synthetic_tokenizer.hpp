// A tokenizer.json of any vocabulary size for synthetic checkpoints and the tokenizer bench: the
// DeepSeek normalizer / pre-tokenizer / decoder sections of a real file with a generated BPE model.
#pragma once

#include <cstdint>
#include <string>

namespace dsv41::synth {

// base_json: a tokenizer.json whose "normalizer" .. "model" sections are copied verbatim (the
// tiny golden tokenizer's are the release's). The model: 256 byte tokens, then random merges of
// earlier tokens (at most 16 bytes, seeded, deterministic) up to min(n_ids, 256 + 127,741) ids,
// the rest added placeholder tokens as in the real vocabulary (129,280 ids: 127,741 merges).
// Throws kInvalidArgument for n_ids < 256 or a base_json without those sections.
std::string synthetic_tokenizer_json(const std::string& base_json, int64_t n_ids);

}  // namespace dsv41::synth
