#include "model/shard_plan.hpp"

#include "core/check.hpp"
#include "parallel/rendezvous.hpp"

namespace dsv41 {

ShardRange ShardPlan::split(int64_t n, int rank, int world) {
  return {rank * n / world, (rank + 1) * n / world};
}

ShardPlan ShardPlan::make(const TextConfig& t, int rank, int world) {
  DSV41_CHECK(world >= 1 && rank >= 0 && rank < world, kInvalidArgument,
              "shard plan: rank {} is outside world {}", rank, world);
  auto need = [&](int64_t n, const char* key) {
    DSV41_CHECK(n >= world, kInvalidArgument,
                "config.json: {} = {} cannot be split across {} tensor-parallel ranks", key, n,
                world);
  };
  need(t.o_groups, "o_groups");
  need(t.n_routed_experts, "n_routed_experts");
  need(int64_t{t.n_shared_experts} * t.moe_intermediate_size,
       "n_shared_experts * moe_intermediate_size");
  need(t.vocab_size, "vocab_size");
  DSV41_CHECK(t.o_groups > 0 && t.num_attention_heads % t.o_groups == 0, kInvalidArgument,
              "config.json: num_attention_heads = {} is not a multiple of o_groups = {}",
              t.num_attention_heads, t.o_groups);
  ShardPlan p;
  p.rank = rank;
  p.world = world;
  p.groups = split(t.o_groups, rank, world);
  const int64_t hpg = t.num_attention_heads / t.o_groups;
  p.heads = {p.groups.begin * hpg, p.groups.end * hpg};
  p.experts = split(t.n_routed_experts, rank, world);
  p.shared_inter = split(int64_t{t.n_shared_experts} * t.moe_intermediate_size, rank, world);
  p.vocab = split(t.vocab_size, rank, world);
  p.vocab_per_rank = (t.vocab_size + world - 1) / world;  // >= every rank's vocab.size()
  // Split only when every rank gets one; binding DSpark under TP refuses the other case.
  const int64_t de = t.dspark_n_routed_experts;
  p.dspark_experts = de >= world ? split(de, rank, world) : ShardRange{0, de};
  return p;
}

std::string ShardPlan::describe() const {
  auto r = [](const ShardRange& s) { return fmt::format("[{},{})", s.begin, s.end); };
  return fmt::format(
      "world {} rank {}: groups {} heads {} experts {} shared_inter {} vocab {} dspark_experts {}",
      world, rank, r(groups), r(heads), r(experts), r(shared_inter), r(vocab), r(dspark_experts));
}

uint64_t ShardPlan::world_hash(const TextConfig& t) const {
  uint64_t h = parallel::fnv1a_64("dsv41-shard-plan-v1");
  for (int q = 0; q < world; ++q) h = parallel::fnv1a_64(make(t, q, world).describe(), h);
  return h;
}

}  // namespace dsv41
