// Per-sequence attention state of the CPU reference (spec model-architecture.md §2.2-2.6): the
// window ring of every layer, the compressed/index-key caches of every KV source, and the
// selections one forward call publishes for the layers after it. The caches hold the model's
// packed formats (§2.8, kv/packed_formats.hpp) in a shared page pool (docs/state.md); tests
// inject the oracle's fp32 caches through CsaSourceState::inject().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kv/page_pool.hpp"
#include "kv/source_cache.hpp"

namespace dsv41 {

struct ModelConfig;

// Options of one sequence's state. pool: the shared KV byte budget (kv/page_pool.hpp); null =
// a private unbounded pool. max_rollback: positions rollback() can undo (speculative decoding
// verifies at most this many drafted tokens; every window ring keeps this many extra slots and
// every ratio > 1 compressor this many extra fp32 rows). max_context: longest sequence.
struct StateOptions {
  std::shared_ptr<kv::PagePool> pool;
  int max_rollback = 16;
  int64_t max_context = 262144;
};

// A pool whose pages fit kv::kEntriesPerPage compressed entries + index keys of this model.
std::shared_ptr<kv::PagePool> make_kv_pool(const ModelConfig& cfg, uint64_t budget_bytes);

// §2.2 step 2: the K=V latents of one layer, post-RoPE, packed FP8 (§2.8, 528 B/slot
// released). capacity = sliding_window + max_rollback slots; slot of position p = p % capacity.
// rollback_depth: positions that can be undone now without losing a slot a later query needs.
struct WindowRing {
  int capacity = 0;
  int head_dim = 0;
  int64_t entry_bytes = 0;
  int64_t next_pos = 0;         // tokens written so far = absolute position of the next token
  int64_t rollback_depth = 0;   // <= max_rollback
  std::vector<uint8_t> packed;  // [capacity, entry_bytes]

  void reset(int capacity_, int head_dim_);
  // Unpacks the entry of absolute position p; requires next_pos - capacity <= p < next_pos.
  void read(int64_t p, float* out) const;
  // Packs the fake-quantised entry of position p into its slot (kInternal if not FP8 values).
  void write(int64_t p, const float* x);
};

// §2.3/§2.4/§2.6: caches owned by one KV-source layer (compressor + indexer keys). Entry j stands
// for source tokens [j·ratio, (j+1)·ratio); visible to query t iff j < floor((t+1)/ratio).
struct CsaSourceState {
  int layer = -1;
  int ratio = 0;
  int head_dim = 0;
  int index_head_dim = 0;
  int64_t n_entries = 0;  // compressed entries (cache.n_compressed() once appended)
  // Compressed entries (RoPE at j·ratio, FP4 block 16 e4m3) and index keys (RoPE, FP4 block 32
  // ue8m0), packed in pool pages.
  kv::SourceCache cache;
  // Ratio > 1: the fp32 x·Wc_kvᵀ and x·Wc_gateᵀ of the tokens of the still-open group (§2.3).
  int pending = 0;                  // buffered tokens, < ratio
  std::vector<float> pending_kv;    // [pending, head_dim]
  std::vector<float> pending_gate;  // [pending, head_dim]
  // Ratio > 1: the same rows of the last recent_capacity = max_rollback + ratio - 1 positions
  // (slot = pos % recent_capacity), so rollback() can rebuild pending_*.
  int recent_capacity = 0;
  std::vector<float> recent_kv, recent_gate;  // [recent_capacity, head_dim]

  void reset(int layer_, int ratio_, int head_dim_, int index_head_dim_,
             std::shared_ptr<kv::PagePool> pool = nullptr, int max_rollback = 16);  // null: private
  // Absolute position of the next source token this state expects.
  int64_t next_pos() const { return n_entries * ratio + pending; }
  // Test injection: replaces the caches with fake-quantised fp32 entries (packed exactly) and
  // sets n_entries; index_keys may be empty when the test does not need them.
  void inject(const std::vector<float>& compressed_kv, const std::vector<float>& index_keys);
  // fp32 copies of the caches: [n_entries, head_dim] and [n_index, index_head_dim].
  std::vector<float> compressed_fp32() const;
  std::vector<float> index_keys_fp32() const;
};

// Everything attention keeps per sequence: window[l] for every backbone layer, source[l] only
// for KV-source layers (other entries stay default with layer = -1). The window rings are
// counted against the pool budget for the state's lifetime.
struct AttentionSequenceState {
  std::vector<WindowRing> window;
  std::vector<CsaSourceState> source;
  StateOptions options;

  AttentionSequenceState() = default;
  AttentionSequenceState(const AttentionSequenceState& o);
  AttentionSequenceState& operator=(const AttentionSequenceState& o);
  AttentionSequenceState(AttentionSequenceState&& o) noexcept;
  AttentionSequenceState& operator=(AttentionSequenceState&& o) noexcept;
  ~AttentionSequenceState();

  // Sized and reset from cfg.text / cfg.roles (ModelConfig must be validated).
  void init(const ModelConfig& cfg, StateOptions opts = {});
  void reset();
  // Before a call that ends at position end_pos: kContextOverflow past max_context, then the
  // pages every source will need (kOutOfMemory leaves the state as it was).
  void reserve_positions(int64_t end_pos);
  // Undoes the last n positions of every layer (exact: re-feeding gives bit-identical results).
  // kInvalidArgument when n > max_rollback or more than the layers can still undo.
  void rollback(int64_t n);
  uint64_t window_bytes() const;  // bytes of all window rings (reserved in the pool)

 private:
  uint64_t reserved_ = 0;
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
