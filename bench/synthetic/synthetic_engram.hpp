// Engram for synthetic checkpoints (spec model-architecture.md §5): the released layer and head
// layout with a small bucket-prime start, so the tables are ~0.4 GB per layer instead of 98 GB
// while every per-token cost (hashing, 48 row gathers, the 6144 -> 25600 wkv GEMV, the gates)
// is the released one.
#pragma once

#include <cstdint>
#include <string>

#include "synthetic/synthetic_checkpoint.hpp"

namespace dsv41::synth {

// The released Engram layout on g: layers 1 and 14 (those below num_hidden_layers), n-grams up to
// 4, 8 heads of 256, pad id 2, bucket primes from `vocab_start` (released 16,000,000; default
// 65,536: ~1.57 M rows = 0.41 GB per layer). With g's hidden size below 1024 (the tiny geometry)
// tiny8's layout instead: layers 2 and 5, n-grams up to 3, 3 heads of 32, primes from 150. Then
// fills the derived fields: num_embeddings from the prime search, compressed_vocab_size from the
// compressed token map of tokenizer_json over g.vocab_size ids (as Transformer::load builds it).
// Throws kInvalidArgument when no Engram layer fits or the tokenizer does not decode every id.
void add_engram(SyntheticGeometry* g, const std::string& tokenizer_json,
                int64_t vocab_start = 65536);

// Table bytes of g's Engram layers (embed.weight + embed.scale; 264 per row at head_dim 256).
uint64_t engram_table_bytes(const SyntheticGeometry& g);

}  // namespace dsv41::synth
