// The decoding loop the speculative tests share: n tokens after `prompt`, one forward per token
// (dec == nullptr) or one SpeculativeDecoder round per step. The session then holds the prompt
// and every token but the last (the pending one), in both modes.
#pragma once

#include <catch2/catch.hpp>
#include <vector>

#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "dsv41/speculative.hpp"

namespace dsv41::test {

inline std::vector<int32_t> decode_tokens(Session& s, Sampler& smp,
                                          const std::vector<int32_t>& prompt, int n,
                                          SpeculativeDecoder* dec) {
  auto r = s.append(prompt);
  REQUIRE(r.is_ok());
  std::vector<int32_t> out = {*smp.sample(*r)};
  REQUIRE(smp.accept(out.back()).is_ok());
  while (static_cast<int>(out.size()) < n) {
    if (dec != nullptr) {
      auto round = dec->step(s, smp, out.back(), n - static_cast<int64_t>(out.size()));
      INFO(round.status().to_string());
      REQUIRE(round.is_ok());
      REQUIRE(!round->tokens.empty());
      out.insert(out.end(), round->tokens.begin(), round->tokens.end());
    } else {
      r = s.append(std::vector<int32_t>{out.back()});
      REQUIRE(r.is_ok());
      out.push_back(*smp.sample(*r));
      REQUIRE(smp.accept(out.back()).is_ok());
    }
    REQUIRE(s.position() == static_cast<int64_t>(prompt.size() + out.size()) - 1);
  }
  REQUIRE(static_cast<int>(out.size()) == n);
  return out;
}

}  // namespace dsv41::test
