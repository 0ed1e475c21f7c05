// The Spark routed-expert banks `exl3/<root>/K<K>/L<LL>[.part].safetensors` resolved through an
// AllocationPlan (spec exl3-format.md §4.2-4.4): which file supplies each (layer, expert), its
// three validated EXL3 projections, grouping by K, and the per-rank expert split for TP.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exl3/allocation_plan.hpp"
#include "exl3/exl3_tensor.hpp"
#include "loader/safetensors.hpp"

namespace dsv41::exl3 {

// Projection order of one routed expert; bank keys `w1` (gate), `w3` (up), `w2` (down).
enum class ExpertProj : uint8_t { kGate = 0, kUp = 1, kDown = 2 };
const char* proj_key(ExpertProj p);  // "w1", "w3", "w2"

// A plan `qdir` entry and the directory it resolved to. Bare names ("qn") mean
// <model>/exl3/<name>; other relative paths are under <model>; an absolute path is used if it
// exists, else re-rooted under <model> by its `exl3/...` suffix (or its last component), because
// the reference launcher rewrites roots to its own mount point (/model/exl3/<name>).
struct BankRoot {
  std::string entry;
  std::string path;
  bool rerooted = false;
};
// Throws kNotFound naming the plan, the entry and the resolved path when a root is missing.
std::vector<BankRoot> resolve_bank_roots(const AllocationPlan& plan, const std::string& model_dir);

// A contiguous expert range [first, last) for one TP rank: [r·E/W, (r+1)·E/W) (the loader's split).
struct ExpertRange {
  int first = 0;
  int last = 0;
  bool contains(int e) const { return e >= first && e < last; }
};
ExpertRange expert_range(int n_experts, int world, int rank);  // throws kInvalidArgument

struct BankExpert {
  int layer = 0;
  int expert = 0;
  int K = 0;
  std::string file;                // path of the supplying bank file
  std::array<Exl3Tensor, 3> proj;  // indexed by ExpertProj
  uint64_t bytes() const;
};

class ExpertBank {
 public:
  struct Options {
    int n_experts = 384;      // routed experts per layer
    int world = 1, rank = 0;  // resolve only this rank's experts
    int64_t hidden = 0;       // expected dims; 0 = take them from the first expert
    int64_t inter = 0;
    std::string dims_from;  // where hidden/inter come from, for the mismatch message
  };

  // Resolves every layer of the plan for the rank's experts: per K, roots in qdir order, in each
  // `L<LL>.safetensors` then `L<LL>.part.safetensors`; an expert takes all its tensors from the
  // first file holding any key `layers.L.ffn.experts.E.*`. Throws naming the layer, expert and
  // files searched: a missing expert, a K differing from the plan, dims differing between experts,
  // a malformed key or EXL3 tensor.
  static std::unique_ptr<ExpertBank> open(const std::string& model_dir, AllocationPlan plan,
                                          const Options& options);
  ~ExpertBank();

  const AllocationPlan& plan() const { return plan_; }
  const std::vector<BankRoot>& roots() const { return roots_; }
  ExpertRange range() const { return range_; }
  int n_experts() const { return options_.n_experts; }
  int64_t hidden() const { return hidden_; }
  int64_t inter() const { return inter_; }

  // nullptr when the expert is native (plan state or layer absent from the plan) or off-rank.
  const BankExpert* find(int layer, int expert) const;
  // K -> local EXL3 experts of `layer` (ascending), for one kernel launch per K.
  std::map<int, std::vector<int>> experts_by_k(int layer) const;
  // Bank bytes of the resolved experts in `range` over all layers.
  uint64_t bytes_in(ExpertRange range) const;
  size_t expert_count() const { return experts_.size(); }

 private:
  ExpertBank() = default;
  struct FileIndex;
  const FileIndex* file_index(const std::string& path, int layer);
  void resolve_layer(int layer);
  void check_dims(const BankExpert& e);

  std::string model_dir_;
  AllocationPlan plan_;
  Options options_;
  ExpertRange range_;
  std::vector<BankRoot> roots_;
  int64_t hidden_ = 0, inter_ = 0;
  std::map<std::string, std::unique_ptr<FileIndex>> files_;
  std::map<std::pair<int, int>, BankExpert> experts_;
};

}  // namespace dsv41::exl3
