// Prompt-lookup drafter (speculative/ngram_drafter.hpp): longest suffix match first, latest
// occurrence first, lookback window, parameter validation.
#include <catch2/catch.hpp>
#include <vector>

#include "dsv41/speculative.hpp"
#include "speculative/ngram_drafter.hpp"

using namespace dsv41;
using dsv41::speculative::ngram_lookup;
using V = std::vector<int32_t>;

TEST_CASE("ngram drafter: the longest matching suffix wins", "[unit][speculative]") {
  NgramDrafterParams p;  // 2..4
  // Suffix (7 8 9) occurs at 0 followed by 1 2; suffix (8 9) also at 5 followed by 5.
  const V ctx = {7, 8, 9, 1, 2, 8, 9, 5, 6, 7, 8, 9};
  REQUIRE(ngram_lookup(ctx, p, 3) == V{1, 2, 8});
  p.max_ngram = 2;  // only bigrams: the latest (8 9) at 5
  REQUIRE(ngram_lookup(ctx, p, 3) == V{5, 6, 7});
}

TEST_CASE(
    "ngram drafter: latest occurrence with a full continuation, cut at max_tokens and the end",
    "[unit][speculative]") {
  NgramDrafterParams p;
  const V ctx = {1, 2, 3, 1, 2, 4, 1, 2};
  REQUIRE(ngram_lookup(ctx, p, 3) == V{4, 1, 2});  // (1 2) at 3, not at 0; runs into the suffix
  REQUIRE(ngram_lookup(ctx, p, 1) == V{4});
  // The latest match leaves only 3 tokens: the earlier one at 0 has the 5 asked for.
  REQUIRE(ngram_lookup(ctx, p, 5) == V{3, 1, 2, 4, 1});
  REQUIRE(ngram_lookup(ctx, p, 0).empty());
  const V rep = {5, 5, 5, 5};  // overlapping self-match
  REQUIRE(ngram_lookup(rep, p, 4) == V{5});
}

TEST_CASE("ngram drafter: no match, short contexts, lookback", "[unit][speculative]") {
  NgramDrafterParams p;
  REQUIRE(ngram_lookup(V{1, 2, 3, 4}, p, 4).empty());
  REQUIRE(ngram_lookup(V{}, p, 4).empty());
  REQUIRE(ngram_lookup(V{1}, p, 4).empty());
  const V ctx = {1, 2, 9, 0, 0, 0, 0, 1, 2};
  REQUIRE(ngram_lookup(ctx, p, 2) == V{9, 0});
  p.lookback = 6;  // the window [3, 9) no longer holds the earlier (1 2)
  REQUIRE(ngram_lookup(ctx, p, 2).empty());
  p.min_ngram = 1;  // but the unigram 2 ... only itself: still nothing before it in the window
  REQUIRE(ngram_lookup(ctx, p, 2).empty());
}

TEST_CASE("ngram drafter: propose through the public factory", "[unit][speculative]") {
  auto d = make_ngram_drafter();
  REQUIRE(d.is_ok());
  auto r = (*d)->propose(V{3, 4, 5, 3, 4}, 2);
  REQUIRE(r.is_ok());
  REQUIRE(r->tokens == V{5, 3});
  REQUIRE(r->probs.empty());
}

TEST_CASE("ngram drafter: bad parameters are refused by name", "[unit][speculative]") {
  NgramDrafterParams p;
  p.min_ngram = 0;
  REQUIRE_THAT(p.validate().message(), Catch::Contains("min_ngram = 0 must be >= 1"));
  p = {};
  p.max_ngram = 1;
  REQUIRE_THAT(make_ngram_drafter(p).status().message(),
               Catch::Contains("max_ngram = 1 must be >= min_ngram = 2"));
  p = {};
  p.max_ngram = 65;
  REQUIRE_THAT(p.validate().message(), Catch::Contains("must be <= 64"));
  p = {};
  p.lookback = -1;
  REQUIRE_THAT(p.validate().message(), Catch::Contains("lookback = -1"));
  SpeculativeParams s;
  s.max_draft_tokens = 16;
  REQUIRE_THAT(s.validate().message(),
               Catch::Contains("SpeculativeParams.max_draft_tokens = 16 must be in [1, 15]"));
  s.max_draft_tokens = 0;
  REQUIRE(s.validate().code() == ErrorCode::kInvalidArgument);
}
