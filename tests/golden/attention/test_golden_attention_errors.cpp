// Misuse of the attention layer on a real (tiny8) checkpoint gives named errors, not crashes:
// wrong shapes at bind, a call at the wrong position, a Reuse/Reindex layer without what its
// source should have published, selections outside the cache.
#include <catch2/catch.hpp>
#include <vector>

#include "golden_case.hpp"
#include "model/attention/attention_layer.hpp"

using namespace dsv41;
using dsv41::test::GoldenCase;

TEST_CASE("attention errors: bind against a checkpoint of other shapes names the tensor",
          "[golden][attention]") {
  GoldenCase small("tiny8");
  GoldenCase big("tiny40");
  const RopeTables rope = RopeTables::from_config(big.cfg.text);
  CHECK_THROWS_WITH(AttentionLayer::bind(*small.ck, big.cfg, 0, rope),
                    Catch::Contains("layers.0.attn.wq_a.weight"));
  const RopeTables small_rope = RopeTables::from_config(small.cfg.text);
  CHECK_THROWS_WITH(AttentionLayer::bind(*big.ck, big.cfg, 0, small_rope),
                    Catch::Contains("qk_rope_head_dim"));
  CHECK_THROWS_WITH(AttentionLayer::bind(*big.ck, big.cfg, 40, rope),
                    Catch::Contains("outside the 40 configured layers"));
}

TEST_CASE("attention errors: position, missing selections, bad indices", "[golden][attention]") {
  GoldenCase gc("tiny8");
  const TextConfig& t = gc.cfg.text;
  const RopeTables rope = RopeTables::from_config(t);
  const std::vector<float> x(4 * t.hidden_size, 0.25f);
  std::vector<float> out(4 * t.hidden_size);

  AttentionSequenceState st;
  StepSelections sel;
  const AttentionLayer swa = AttentionLayer::bind(*gc.ck, gc.cfg, 0, rope);
  CHECK_THROWS_WITH(swa.forward(x.data(), 4, 0, st, sel, out.data(), nullptr),
                    Catch::Contains("the attention state holds 0 layers"));
  st.init(gc.cfg);
  CHECK_THROWS_WITH(swa.forward(x.data(), 4, 5, st, sel, out.data(), nullptr),
                    Catch::Contains("starts at position 5 but the window holds 0 tokens"));
  swa.forward(x.data(), 4, 0, st, sel, out.data(), nullptr);
  CHECK(st.window[0].next_pos == 4);

  // tiny8: layer 2 reuses layer 1's selection; layer 6 is Reindex inside layer 4's candidates.
  REQUIRE(gc.cfg.roles[2].role == AttnRole::kReuse);
  REQUIRE(gc.cfg.roles[6].role == AttnRole::kReindex);
  const AttentionLayer reuse = AttentionLayer::bind(*gc.ck, gc.cfg, 2, rope);
  CHECK_THROWS_WITH(reuse.forward(x.data(), 4, 0, st, sel, out.data(), nullptr),
                    Catch::Contains("no selection of index source 1"));
  IndexSelection& s = sel.index[1];
  s.T = 4;
  s.topk = t.index_topk;
  s.index.assign(4 * t.index_topk, -1);
  s.index[0] = 7;  // the source cache is empty
  CHECK_THROWS_WITH(reuse.forward(x.data(), 4, 0, st, sel, out.data(), nullptr),
                    Catch::Contains("selected entry 7"));

  const AttentionLayer reindex = AttentionLayer::bind(*gc.ck, gc.cfg, 6, rope);
  CHECK_THROWS_WITH(reindex.forward(x.data(), 4, 0, st, sel, out.data(), nullptr),
                    Catch::Contains("no candidate mask of layer 4"));

  const AttentionLayer full = AttentionLayer::bind(*gc.ck, gc.cfg, 1, rope);
  st.source[1].pending = 1;  // pretend a token was already compressed
  CHECK_THROWS_WITH(full.forward(x.data(), 4, 0, st, sel, out.data(), nullptr),
                    Catch::Contains("compressor state expects position 1"));
}
