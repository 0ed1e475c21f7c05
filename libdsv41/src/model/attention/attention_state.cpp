#include "model/attention/attention_state.hpp"

#include <algorithm>

#include "config/model_config.hpp"
#include "core/check.hpp"
#include "kv/packed_formats.hpp"

namespace dsv41 {

std::shared_ptr<kv::PagePool> make_kv_pool(const ModelConfig& cfg, uint64_t budget_bytes) {
  const TextConfig& t = cfg.text;
  const int64_t per_entry = kv::packed_bytes(kv::EntryFormat::kCompressedFp4, t.head_dim) +
                            kv::packed_bytes(kv::EntryFormat::kIndexFp4, t.index_head_dim);
  return std::make_shared<kv::PagePool>(kv::kEntriesPerPage * per_entry, budget_bytes);
}

void WindowRing::reset(int capacity_, int head_dim_) {
  capacity = capacity_;
  head_dim = head_dim_;
  entry_bytes = kv::packed_bytes(kv::EntryFormat::kWindowFp8, head_dim_);
  next_pos = 0;
  rollback_depth = 0;
  packed.assign(static_cast<size_t>(capacity) * entry_bytes, 0);
}

void WindowRing::read(int64_t p, float* out) const {
  DSV41_CHECK(p >= 0 && p < next_pos && p >= next_pos - capacity, kInternal,
              "window ring: position {} is outside the kept range [{}, {})", p,
              std::max<int64_t>(0, next_pos - capacity), next_pos);
  kv::unpack(kv::EntryFormat::kWindowFp8, packed.data() + (p % capacity) * entry_bytes, head_dim,
             out);
}

void WindowRing::write(int64_t p, const float* x) {
  kv::pack(kv::EntryFormat::kWindowFp8, x, head_dim, packed.data() + (p % capacity) * entry_bytes);
}

void CsaSourceState::reset(int layer_, int ratio_, int head_dim_, int index_head_dim_,
                           std::shared_ptr<kv::PagePool> pool, int max_rollback) {
  layer = layer_;
  ratio = ratio_;
  head_dim = head_dim_;
  index_head_dim = index_head_dim_;
  n_entries = 0;
  if (pool == nullptr) {
    const int64_t per_entry = kv::packed_bytes(kv::EntryFormat::kCompressedFp4, head_dim_) +
                              kv::packed_bytes(kv::EntryFormat::kIndexFp4, index_head_dim_);
    pool =
        std::make_shared<kv::PagePool>(kv::kEntriesPerPage * per_entry, kv::PagePool::kUnbounded);
  }
  cache = kv::SourceCache(std::move(pool), layer_, head_dim_, index_head_dim_);
  pending = 0;
  pending_kv.clear();
  pending_gate.clear();
  recent_capacity = ratio_ > 1 ? max_rollback + ratio_ - 1 : 0;
  recent_kv.assign(static_cast<size_t>(recent_capacity) * head_dim_, 0.0f);
  recent_gate.assign(static_cast<size_t>(recent_capacity) * head_dim_, 0.0f);
}

void CsaSourceState::inject(const std::vector<float>& compressed_kv,
                            const std::vector<float>& index_keys) {
  DSV41_CHECK(cache.pool() != nullptr && compressed_kv.size() % head_dim == 0 &&
                  (index_head_dim == 0 || index_keys.size() % index_head_dim == 0),
              kInvalidArgument,
              "layer {}: injected caches of {} / {} values are not whole entries of {} / {}", layer,
              compressed_kv.size(), index_keys.size(), head_dim, index_head_dim);
  cache.truncate(0);
  const int64_t n = static_cast<int64_t>(compressed_kv.size()) / head_dim;
  for (int64_t j = 0; j < n; ++j) cache.append_compressed(compressed_kv.data() + j * head_dim);
  const int64_t ni =
      index_head_dim > 0 ? static_cast<int64_t>(index_keys.size()) / index_head_dim : 0;
  for (int64_t j = 0; j < ni; ++j) cache.append_index(index_keys.data() + j * index_head_dim);
  n_entries = n;
}

std::vector<float> CsaSourceState::compressed_fp32() const {
  std::vector<float> out(static_cast<size_t>(cache.n_compressed()) * head_dim);
  for (int64_t j = 0; j < cache.n_compressed(); ++j)
    cache.read_compressed(j, out.data() + j * head_dim);
  return out;
}

std::vector<float> CsaSourceState::index_keys_fp32() const {
  std::vector<float> out(static_cast<size_t>(cache.n_index()) * index_head_dim);
  for (int64_t j = 0; j < cache.n_index(); ++j)
    cache.read_index(j, out.data() + j * index_head_dim);
  return out;
}

AttentionSequenceState::AttentionSequenceState(const AttentionSequenceState& o)
    : window(o.window), source(o.source), options(o.options) {
  if (options.pool != nullptr) options.pool->reserve(o.reserved_, "a copied sequence's windows");
  reserved_ = o.reserved_;
}

AttentionSequenceState& AttentionSequenceState::operator=(const AttentionSequenceState& o) {
  if (this != &o) *this = AttentionSequenceState(o);
  return *this;
}

AttentionSequenceState::AttentionSequenceState(AttentionSequenceState&& o) noexcept
    : window(std::move(o.window)),
      source(std::move(o.source)),
      options(std::move(o.options)),
      reserved_(o.reserved_) {
  o.reserved_ = 0;
}

AttentionSequenceState& AttentionSequenceState::operator=(AttentionSequenceState&& o) noexcept {
  if (this != &o) {
    if (options.pool != nullptr && reserved_ > 0) options.pool->unreserve(reserved_);
    window = std::move(o.window);
    source = std::move(o.source);
    options = std::move(o.options);
    reserved_ = o.reserved_;
    o.reserved_ = 0;
  }
  return *this;
}

AttentionSequenceState::~AttentionSequenceState() {
  source.clear();  // return the pages before the pool reference goes
  if (options.pool != nullptr && reserved_ > 0) options.pool->unreserve(reserved_);
}

void AttentionSequenceState::init(const ModelConfig& cfg, StateOptions opts) {
  const TextConfig& t = cfg.text;
  DSV41_CHECK(static_cast<int>(cfg.roles.size()) == t.num_hidden_layers, kInvalidArgument,
              "attention state: config has {} layer roles for {} layers (validate() not run?)",
              cfg.roles.size(), t.num_hidden_layers);
  DSV41_CHECK(t.sliding_window > 0 && t.head_dim > 0, kInvalidArgument,
              "attention state: sliding_window = {} and head_dim = {} must be positive",
              t.sliding_window, t.head_dim);
  DSV41_CHECK(opts.max_rollback >= 0 && opts.max_context > 0, kInvalidArgument,
              "attention state: max_rollback = {} must be >= 0 and max_context = {} positive",
              opts.max_rollback, opts.max_context);
  *this = AttentionSequenceState();  // returns any previous pages and reservation
  if (opts.pool == nullptr) opts.pool = make_kv_pool(cfg, kv::PagePool::kUnbounded);
  options = std::move(opts);
  const int capacity = t.sliding_window + options.max_rollback;
  const uint64_t bytes = static_cast<uint64_t>(t.num_hidden_layers) * capacity *
                         kv::packed_bytes(kv::EntryFormat::kWindowFp8, t.head_dim);
  options.pool->reserve(bytes, "a new sequence's window rings");
  reserved_ = bytes;
  window.assign(t.num_hidden_layers, WindowRing{});
  source.resize(t.num_hidden_layers);
  for (int l = 0; l < t.num_hidden_layers; ++l) {
    window[l].reset(capacity, t.head_dim);
    const LayerRole& r = cfg.roles[l];
    if (r.kv_source)
      source[l].reset(l, r.ratio, t.head_dim, t.index_head_dim, options.pool, options.max_rollback);
  }
}

void AttentionSequenceState::reset() {
  for (WindowRing& w : window) w.reset(w.capacity, w.head_dim);
  for (CsaSourceState& s : source)
    if (s.layer >= 0)
      s.reset(s.layer, s.ratio, s.head_dim, s.index_head_dim, options.pool, options.max_rollback);
}

void AttentionSequenceState::reserve_positions(int64_t end_pos) {
  DSV41_CHECK(end_pos <= options.max_context, kContextOverflow,
              "sequence: {} positions exceed the maximum context of {} tokens", end_pos,
              options.max_context);
  try {
    for (CsaSourceState& s : source)
      if (s.layer >= 0) s.cache.reserve(end_pos / s.ratio);
  } catch (...) {
    for (CsaSourceState& s : source)
      if (s.layer >= 0) s.cache.trim();
    throw;
  }
}

void AttentionSequenceState::rollback(int64_t n) {
  DSV41_CHECK(n >= 0 && n <= options.max_rollback, kInvalidArgument,
              "rollback of {} positions: the limit is max_rollback = {}", n, options.max_rollback);
  if (n == 0 || window.empty()) return;
  int64_t depth = n;
  for (const WindowRing& w : window) depth = std::min(depth, w.rollback_depth);
  DSV41_CHECK(depth == n, kInvalidArgument,
              "rollback of {} positions: only {} can be undone now (positions fed since the last "
              "rollback, at most max_rollback = {})",
              n, depth, options.max_rollback);
  for (WindowRing& w : window) {
    w.next_pos -= n;
    w.rollback_depth -= n;
  }
  for (CsaSourceState& s : source) {
    if (s.layer < 0) continue;
    const int64_t pos = s.next_pos() - n;
    s.n_entries = pos / s.ratio;
    s.cache.truncate(s.n_entries);
    s.pending = static_cast<int>(pos % s.ratio);
    const int64_t D = s.head_dim;
    s.pending_kv.resize(static_cast<size_t>(s.pending) * D);
    s.pending_gate.resize(static_cast<size_t>(s.pending) * D);
    for (int64_t i = 0; i < s.pending; ++i) {  // rows of positions [n_entries·ratio, pos)
      const int64_t slot = (s.n_entries * s.ratio + i) % s.recent_capacity;
      std::copy_n(s.recent_kv.begin() + slot * D, D, s.pending_kv.begin() + i * D);
      std::copy_n(s.recent_gate.begin() + slot * D, D, s.pending_gate.begin() + i * D);
    }
  }
}

uint64_t AttentionSequenceState::window_bytes() const { return reserved_; }

}  // namespace dsv41
