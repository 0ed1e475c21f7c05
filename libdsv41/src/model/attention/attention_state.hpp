// Per-sequence attention state of the CPU reference (spec model-architecture.md §2.2-2.6): the
// window ring of every layer, the compressed/index-key caches of every KV source, and the
// selections one forward call publishes for the layers after it. Plain structs on purpose: the
// golden tests inject the oracle's saved caches and selections into them directly.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace dsv41 {

struct ModelConfig;

// §2.2 step 2: the last `capacity` (= sliding_window) K=V latents of one layer, post-RoPE and
// FP8 fake-quantised (§2.7), fp32. Slot of absolute position p = p % capacity.
// Bytes in a packed engine: capacity × (head_dim + head_dim/32) (528 B/slot released, §2.8).
struct WindowRing {
  int capacity = 0;
  int head_dim = 0;
  int64_t next_pos = 0;   // tokens written so far = absolute position of the next token
  std::vector<float> kv;  // [capacity, head_dim]

  void reset(int capacity_, int head_dim_);
  // Entry of absolute position p; requires next_pos - capacity <= p < next_pos.
  const float* at(int64_t p) const;
  float* slot(int64_t p) { return kv.data() + (p % capacity) * head_dim; }
};

// §2.3/§2.4/§2.6: caches owned by one KV-source layer (compressor + indexer keys). Entry j stands
// for source tokens [j·ratio, (j+1)·ratio); visible to query t iff j < floor((t+1)/ratio).
struct CsaSourceState {
  int layer = -1;
  int ratio = 0;
  int head_dim = 0;
  int index_head_dim = 0;
  int64_t n_entries = 0;
  std::vector<float> compressed_kv;  // [n_entries, head_dim]: RoPE at j·ratio, FP4 block 16 (e4m3)
  std::vector<float> index_keys;     // [n_entries, index_head_dim]: RoPE, FP4 block 32 (ue8m0)
  // Ratio > 1: the fp32 x·Wc_kvᵀ and x·Wc_gateᵀ of the tokens of the still-open group (§2.3).
  int pending = 0;                  // buffered tokens, < ratio
  std::vector<float> pending_kv;    // [pending, head_dim]
  std::vector<float> pending_gate;  // [pending, head_dim]

  void reset(int layer_, int ratio_, int head_dim_, int index_head_dim_);
  // Absolute position of the next source token this state expects.
  int64_t next_pos() const { return n_entries * ratio + pending; }
};

// Everything attention keeps per sequence: window[l] for every backbone layer, source[l] only
// for KV-source layers (other entries stay default with layer = -1).
struct AttentionSequenceState {
  std::vector<WindowRing> window;
  std::vector<CsaSourceState> source;

  // Sized and reset from cfg.text / cfg.roles (ModelConfig must be validated).
  void init(const ModelConfig& cfg);
  void reset();
};

// Published by an index source for the T queries of one forward call (§2.4).
struct IndexSelection {
  int64_t T = 0;
  int topk = 0;                // index_topk
  std::vector<int32_t> index;  // [T, topk]: compressed-entry indices ascending, -1 padded
};

// Published by the candidate source (§2.5): 1 = entry inside a kept block.
struct CandidateMask {
  int64_t T = 0;
  int64_t n_entries = 0;      // = the KV source's n_entries during this call
  std::vector<uint8_t> mask;  // [T, n_entries]
};

// Per forward call (T tokens at [pos0, pos0+T)): what index sources publish for the Reuse /
// Reindex layers after them. Keyed by the publishing layer id. Clear it at every call.
struct StepSelections {
  std::map<int, IndexSelection> index;
  std::map<int, CandidateMask> candidates;
  void clear() {
    index.clear();
    candidates.clear();
  }
};

// Optional capture for tests, filled when passed to forward() (fields of the layer's role only).
struct AttentionTrace {
  int64_t n_entries = 0;                      // columns of index_scores
  std::vector<float> index_scores;            // [T, n_entries], -inf = invisible / not candidate
  int64_t n_blocks = 0;                       // candidate source only
  std::vector<float> candidate_block_scores;  // [T, n_blocks], newest block +inf
  // KV sources: the entries this call appended, post-RoPE and before FP4 (appended in order), so
  // a test can tell a rounding-boundary case from a real mismatch.
  std::vector<float> compressed_prequant;  // [groups, head_dim]
  std::vector<float> index_keys_prequant;  // [groups, index_head_dim]
};

}  // namespace dsv41
