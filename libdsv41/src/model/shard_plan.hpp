// ShardPlan: which part of every split tensor one tensor-parallel rank holds (docs/tp.md,
// "Sharding"). The one place that decides shard ranges: ModelWeights::bind, AttentionLayer and
// the MoE read them from here and nowhere else computes a rank's offset.
//
// Split dimensions (each a contiguous range per rank, rank r of W gets [r·n/W, (r+1)·n/W)):
//   o_groups       attention output groups; the rank's query heads are the heads of its groups
//                  (wq_b rows heads·head_dim, attn_sink, wo_a rows groups·o_lora, wo_b columns)
//   experts        routed experts (ffn.experts.{j})
//   shared_inter   shared-expert intermediate dim (w1/w3 rows, w2 columns)
//   vocab          head rows; logits are all-gathered (padded to vocab_per_rank per rank)
//   dspark_experts the DSpark stages' routed experts (mtp.s.ffn.experts.{j}); the stages'
//                  attention and shared expert split as the backbone's (groups, shared_inter)
// Everything else is replicated. World 1 is the identity plan (every range is the whole dim).
#pragma once

#include <cstdint>
#include <string>

#include "config/model_config.hpp"

namespace dsv41 {

struct ShardRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool contains(int64_t i) const { return begin <= i && i < end; }
};

struct ShardPlan {
  int rank = 0, world = 1;
  ShardRange groups;           // o_groups
  ShardRange heads;            // query heads = groups · (num_attention_heads / o_groups)
  ShardRange experts;          // n_routed_experts
  ShardRange shared_inter;     // n_shared_experts · moe_intermediate_size
  ShardRange vocab;            // vocab_size
  ShardRange dspark_experts;   // dspark_n_routed_experts (whole when fewer than the ranks)
  int64_t vocab_per_rank = 0;  // all_gather chunk: max over ranks of vocab.size()

  // kInvalidArgument naming the config key when a split dimension has fewer entries than
  // ranks (a rank would hold nothing) or rank/world are out of range.
  static ShardPlan make(const TextConfig& t, int rank, int world);

  bool sharded() const { return world > 1; }
  // Rank r's range of a dimension of n entries (the rule above).
  static ShardRange split(int64_t n, int rank, int world);
  // "world 2 rank 1: groups [1,3) heads [1,3) experts [3,6) shared_inter [32,64) vocab
  // [300,600) dspark_experts [2,4)".
  std::string describe() const;
  // Hash of the plan of the WHOLE world (every rank's ranges), equal on all ranks of a
  // consistent deployment: the rendezvous compares it.
  uint64_t world_hash(const TextConfig& t) const;
};

}  // namespace dsv41
