// Teacher-forced attention sublayer against the oracle (tests/fixtures/golden/tiny40/README.md,
// "Recommended tolerances and protocol" 1): every layer of tiny40 and tiny8 gets the oracle's
// `debug.attn_normed[l]` for the 37 tokens of prompt1, in one call, in chunks 16+16+5 and
// 7+13+17, and token by token. Full layers run their own compressor/indexer from an empty
// cache; Reuse/Reindex layers get the oracle's saved caches, selections and candidate masks.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "golden_case.hpp"
#include "model/attention/attention_layer.hpp"
#include "model/attention/kv_quant.hpp"

using namespace dsv41;
using dsv41::test::GoldenCase;
using dsv41::test::require_close_2d;
using dsv41::test::require_equal_2d;

namespace {

constexpr double kTol = 1e-5;  // README: abs 1e-5 per layer for an fp32 engine

struct Plan {
  std::string name;
  std::vector<int64_t> chunks;
};

std::vector<Plan> plans(int64_t T) {
  Plan tokens{"token-by-token", std::vector<int64_t>(T, 1)};
  return {
      {"one-shot", {T}}, {"chunks 16+16+5", {16, 16, 5}}, {"chunks 7+13+17", {7, 13, 17}}, tokens};
}

// Rows [t0, t0+n) of a row-major [T, cols] tensor.
template <typename T>
std::vector<T> rows(const std::vector<float>& m, int64_t cols, int64_t t0, int64_t n) {
  return std::vector<T>(m.begin() + t0 * cols, m.begin() + (t0 + n) * cols);
}

// What one layer produced over all chunks, laid out as the oracle's tensors.
struct LayerResult {
  std::vector<float> out;           // [T, hidden]
  std::vector<float> scores;        // [T, C]; columns past the chunk's entries are -inf
  std::vector<float> sel;           // [T, index_topk]
  std::vector<float> block_scores;  // [T, NB]; past the chunk's blocks -inf
  std::vector<float> cand;          // [T, C]; compared only below the chunk's entry count
  std::vector<int64_t> cand_cols;   // per row: entries that existed when it was computed
  CsaSourceState source;            // Full layers: the cache after the last chunk
  std::vector<float> compressed_pre, keys_pre;  // Full layers: the cache entries before FP4
};

using RowQuantizer = void (*)(float*, int64_t);

// Quantised caches must be identical, except an element whose pre-quantisation value (or its
// block's scale input) lies within 1e-6 relative of a rounding boundary: such an element is
// accepted when nudging the row, or the element alone, by ±1e-6 relative gives the oracle's value.
void require_quantized_equal(const std::string& what, const std::vector<float>& got,
                             const std::vector<float>& want, const std::vector<float>& pre,
                             int64_t width, RowQuantizer quant) {
  REQUIRE(got.size() == want.size());
  REQUIRE(pre.size() == want.size());
  size_t unexplained = 0, boundary = 0, first = 0;
  for (size_t r = 0; r < got.size() / width; ++r) {
    for (int64_t i = 0; i < width; ++i) {
      const size_t k = r * width + i;
      if (got[k] == want[k]) continue;
      bool explained = false;
      for (double f : {1 + 1e-6, 1 - 1e-6}) {
        for (bool whole_row : {true, false}) {
          std::vector<float> row(pre.begin() + r * width, pre.begin() + (r + 1) * width);
          if (whole_row) {
            for (float& v : row) v = static_cast<float>(v * f);
          } else {
            row[i] = static_cast<float>(row[i] * f);
          }
          quant(row.data(), width);
          explained = explained || row[i] == want[k];
        }
      }
      if (explained) {
        ++boundary;
      } else if (unexplained++ == 0) {
        first = k;
      }
    }
  }
  std::ostringstream msg;
  msg << what << ": " << unexplained << " elements differ away from a rounding boundary ("
      << boundary << " boundary cases)";
  if (unexplained > 0)
    msg << "; first [" << first / width << ", " << first % width << "] got " << got[first]
        << " want " << want[first] << " pre-quantisation " << pre[first];
  INFO(msg.str());
  REQUIRE(unexplained == 0);
}

class LayerRunner {
 public:
  LayerRunner(const GoldenCase& gc, const RopeTables& rope, ThreadPool& pool)
      : gc_(gc), rope_(rope), pool_(pool) {
    const TextConfig& t = gc.cfg.text;
    hidden_ = t.hidden_size;
    x_all_ = gc.get("debug.attn_normed", &shape_);
    T_ = shape_[1];
  }
  int64_t T() const { return T_; }

  LayerResult run(int l, const Plan& plan) const {
    const TextConfig& t = gc_.cfg.text;
    const LayerRole& role = gc_.cfg.roles[l];
    const AttentionLayer layer = AttentionLayer::bind(*gc_.ck, gc_.cfg, l, rope_);
    AttentionSequenceState st;
    st.init(gc_.cfg);
    const bool inject = role.ratio > 0 && !role.kv_source;
    int64_t C = 0;
    if (role.ratio > 0) C = gc_.get(csa(role.kv_layer, "compressed_kv")).size() / t.head_dim;
    if (inject) {  // Reuse / Reindex: the oracle's caches of the KV source after the prefill
      CsaSourceState& s = st.source[role.kv_layer];
      s.inject(gc_.get(csa(role.kv_layer, "compressed_kv")),
               gc_.get(csa(role.kv_layer, "index_k")));
    }
    const int64_t NB = C == 0 ? 0 : (C + t.candidate_block_size - 1) / t.candidate_block_size;
    LayerResult r;
    r.out.assign(T_ * hidden_, 0.0f);
    r.scores.assign(T_ * C, -INFINITY);
    r.sel.assign(T_ * t.index_topk, -1.0f);
    r.block_scores.assign(T_ * NB, -INFINITY);
    r.cand.assign(T_ * C, 0.0f);
    r.cand_cols.assign(T_, 0);
    const float* x = x_all_.data() + l * T_ * hidden_;
    int64_t t0 = 0;
    for (int64_t n : plan.chunks) {
      StepSelections sel;
      if (role.role == AttnRole::kReuse) {
        const std::vector<float> g =
            gc_.get("debug.index_sel.L" + std::to_string(role.index_layer));
        IndexSelection& s = sel.index[role.index_layer];
        s.T = n;
        s.topk = t.index_topk;
        s.index = rows<int32_t>(g, t.index_topk, t0, n);
      }
      if (role.index_source && t.candidate_source_layer_id >= 0 &&
          t.candidate_source_layer_id < l) {
        const int c = t.candidate_source_layer_id;
        CandidateMask& m = sel.candidates[c];
        m.T = n;
        m.n_entries = C;
        m.mask = rows<uint8_t>(gc_.get("debug.candidates.L" + std::to_string(c)), C, t0, n);
      }
      AttentionTrace trace;
      layer.forward(x + t0 * hidden_, n, t0, st, sel, r.out.data() + t0 * hidden_, &pool_, &trace);
      r.compressed_pre.insert(r.compressed_pre.end(), trace.compressed_prequant.begin(),
                              trace.compressed_prequant.end());
      r.keys_pre.insert(r.keys_pre.end(), trace.index_keys_prequant.begin(),
                        trace.index_keys_prequant.end());
      if (role.index_source) {
        const int64_t nc = trace.n_entries;
        REQUIRE(nc <= C);
        for (int64_t i = 0; i < n; ++i) {
          std::copy_n(trace.index_scores.begin() + i * nc, nc, r.scores.begin() + (t0 + i) * C);
          const IndexSelection& s = sel.index.at(l);
          std::copy_n(s.index.begin() + i * s.topk, s.topk, r.sel.begin() + (t0 + i) * s.topk);
        }
      }
      if (role.candidate_source) {
        const CandidateMask& m = sel.candidates.at(l);
        for (int64_t i = 0; i < n; ++i) {
          std::copy_n(trace.candidate_block_scores.begin() + i * trace.n_blocks, trace.n_blocks,
                      r.block_scores.begin() + (t0 + i) * NB);
          std::copy_n(m.mask.begin() + i * m.n_entries, m.n_entries, r.cand.begin() + (t0 + i) * C);
          r.cand_cols[t0 + i] = m.n_entries;
        }
      }
      t0 += n;
    }
    if (role.kv_source) r.source = st.source[l];
    return r;
  }

  static std::string csa(int source, const char* what) {
    return "debug.csa.L" + std::to_string(source) + "." + what;
  }

 private:
  const GoldenCase& gc_;
  const RopeTables& rope_;
  ThreadPool& pool_;
  std::vector<int64_t> shape_;
  std::vector<float> x_all_;
  int64_t T_ = 0, hidden_ = 0;
};

void check_case(const std::string& case_name) {
  GoldenCase gc(case_name);
  const TextConfig& t = gc.cfg.text;
  ThreadPool pool(0);
  const RopeTables rope = RopeTables::from_config(t);
  LayerRunner runner(gc, rope, pool);
  const int64_t T = runner.T(), D = t.hidden_size;
  std::vector<int64_t> shape;
  const std::vector<float> attn_out = gc.get("debug.attn_out", &shape);
  REQUIRE(static_cast<int>(gc.oracle_roles.size()) == t.num_hidden_layers);
  for (int l = 0; l < t.num_hidden_layers; ++l) {
    const LayerRole& role = gc.cfg.roles[l];
    const std::string ls = std::to_string(l);
    {
      INFO(case_name << " layer " << l << ": our role " << attn_role_name(role.role)
                     << ", oracle's " << gc.oracle_roles[l]);
      REQUIRE(gc.oracle_roles[l] == attn_role_name(role.role));
    }
    for (const Plan& plan : plans(T)) {
      const std::string where =
          case_name + " [" + plan.name + "] layer " + ls + " (" + attn_role_name(role.role) + ")";
      const LayerResult r = runner.run(l, plan);
      const std::vector<float> want_out(attn_out.begin() + l * T * D,
                                        attn_out.begin() + (l + 1) * T * D);
      require_close_2d(where + " debug.attn_out", r.out, want_out, D, kTol);
      if (role.kv_source) {
        require_quantized_equal(where + " debug.csa.L" + ls + ".compressed_kv",
                                r.source.compressed_fp32(),
                                gc.get(LayerRunner::csa(l, "compressed_kv")), r.compressed_pre,
                                t.head_dim, &fake_quant_compressed_fp4);
        require_quantized_equal(where + " debug.csa.L" + ls + ".index_k",
                                r.source.index_keys_fp32(), gc.get(LayerRunner::csa(l, "index_k")),
                                r.keys_pre, t.index_head_dim, &fake_quant_index_fp4);
      }
      if (role.index_source) {
        const std::vector<float> want = gc.get("debug.index_scores.L" + ls);
        require_close_2d(where + " debug.index_scores.L" + ls, r.scores, want,
                         static_cast<int64_t>(want.size()) / T, kTol);
        require_equal_2d(where + " debug.index_sel.L" + ls, r.sel, gc.get("debug.index_sel.L" + ls),
                         t.index_topk);
      }
      if (role.candidate_source) {
        const std::vector<float> want_bs = gc.get("debug.candidate_block_scores.L" + ls);
        require_close_2d(where + " debug.candidate_block_scores.L" + ls, r.block_scores, want_bs,
                         static_cast<int64_t>(want_bs.size()) / T, kTol);
        // Columns past the entries that existed at a chunk's end are not computed there (they are
        // invisible to its queries); in a one-shot prefill they exist and may lie in a kept block.
        std::vector<float> want_c = gc.get("debug.candidates.L" + ls);
        const int64_t C = static_cast<int64_t>(want_c.size()) / T;
        std::vector<float> got_c = r.cand;
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = r.cand_cols[i]; j < C; ++j) got_c[i * C + j] = want_c[i * C + j];
        require_equal_2d(where + " debug.candidates.L" + ls, got_c, want_c, C);
      }
    }
  }
}

}  // namespace

TEST_CASE("attention golden: tiny8, every layer, every chunking", "[golden][attention]") {
  check_case("tiny8");
}

TEST_CASE("attention golden: tiny40, every layer, every chunking", "[golden][attention]") {
  check_case("tiny40");
}

TEST_CASE("attention golden: RoPE tables equal the oracle's inv_freq", "[golden][attention]") {
  for (const char* name : {"tiny40", "tiny8"}) {
    GoldenCase gc(name);
    const RopeTables rope = RopeTables::from_config(gc.cfg.text);
    const std::vector<float> main = gc.get("rope.inv_freq_main");
    const std::vector<float> comp = gc.get("rope.inv_freq_compress");
    REQUIRE(main.size() == rope.main.size());
    REQUIRE(comp.size() == rope.compress.size());
    for (size_t i = 0; i < main.size(); ++i) {
      INFO(name << " inv_freq_main[" << i << "] got " << rope.main[i] << " want " << main[i]);
      CHECK(std::fabs(rope.main[i] - main[i]) <= 1e-7 * std::fabs(main[i]));
    }
    for (size_t i = 0; i < comp.size(); ++i) {
      INFO(name << " inv_freq_compress[" << i << "] got " << rope.compress[i] << " want "
                << comp[i]);
      CHECK(std::fabs(rope.compress[i] - comp[i]) <= 1e-7 * std::fabs(comp[i]));
    }
  }
}
