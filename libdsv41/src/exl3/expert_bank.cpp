// Bank resolution, following the Spark loader (st_exl3_moe.py `_states`, `_bank_files`,
// `process_weights_after_loading`; spec exl3-format.md §4.4).
#include "exl3/expert_bank.hpp"

#include <fmt/ranges.h>

#include <charconv>
#include <filesystem>

#include "core/check.hpp"
#include "loader/checkpoint.hpp"

namespace dsv41::exl3 {

namespace fs = std::filesystem;

namespace {

// `layers.<L>.ffn.experts.<E>.<w>.<sub>` split on dots.
std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

bool parse_int(std::string_view s, int& v) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && ptr == s.data() + s.size() && v >= 0;
}

int proj_index(std::string_view w) {
  for (int p = 0; p < 3; ++p)
    if (w == proj_key(static_cast<ExpertProj>(p))) return p;
  return -1;
}

}  // namespace

const char* proj_key(ExpertProj p) {
  switch (p) {
    case ExpertProj::kGate:
      return "w1";
    case ExpertProj::kUp:
      return "w3";
    default:
      return "w2";
  }
}

uint64_t BankExpert::bytes() const {
  return proj[0].stored_bytes + proj[1].stored_bytes + proj[2].stored_bytes;
}

std::vector<BankRoot> resolve_bank_roots(const AllocationPlan& plan, const std::string& model_dir) {
  std::vector<BankRoot> roots;
  const fs::path model(model_dir);
  for (const std::string& entry : plan.qdir) {
    BankRoot r;
    r.entry = entry;
    const fs::path p(entry);
    if (p.is_absolute()) {
      if (fs::is_directory(p)) {
        r.path = entry;
      } else {
        // Re-root: keep what follows the last "/exl3/" (or the last component) under <model>/exl3.
        const size_t at = entry.rfind("/exl3/");
        const fs::path tail =
            at != std::string::npos ? fs::path(entry.substr(at + 6)) : p.filename();
        r.path = (model / "exl3" / tail).string();
        r.rerooted = true;
      }
    } else if (entry.find('/') == std::string::npos) {
      r.path = (model / "exl3" / p).string();
    } else {
      r.path = (model / p).string();
    }
    DSV41_CHECK(fs::is_directory(r.path), kNotFound,
                "{}: bank root '{}' (qdir entry) resolves to {}, which is not a directory",
                plan.path, entry, r.path);
    roots.push_back(std::move(r));
  }
  return roots;
}

ExpertRange expert_range(int n_experts, int world, int rank) {
  DSV41_CHECK(n_experts > 0 && world > 0 && rank >= 0 && rank < world, kInvalidArgument,
              "expert range: need n_experts > 0 and 0 <= rank < world (got {} experts, rank {} of "
              "{})",
              n_experts, rank, world);
  const int64_t n = n_experts;
  return {static_cast<int>(rank * n / world), static_cast<int>((rank + 1) * n / world)};
}

// Every `layers.L.ffn.experts.E.*` key of one bank file, grouped by expert.
struct ExpertBank::FileIndex {
  std::unique_ptr<SafetensorsFile> file;
  std::map<int, std::vector<std::pair<std::string, TensorView>>> by_expert;  // "w1.trellis"
};

ExpertBank::~ExpertBank() = default;

const ExpertBank::FileIndex* ExpertBank::file_index(const std::string& path, int layer) {
  if (auto it = files_.find(path); it != files_.end()) return it->second.get();
  if (!fs::is_regular_file(path)) {
    files_.emplace(path, nullptr);
    return nullptr;
  }
  auto idx = std::make_unique<FileIndex>();
  idx->file = SafetensorsFile::open(path);
  for (const TensorInfo& info : idx->file->header().tensors) {
    const auto p = split_dots(info.name);
    if (p.size() <= 5) continue;  // the loader reads only keys with more than 5 parts
    int l = -1, e = -1;
    DSV41_CHECK(p.size() == 7 && p[0] == "layers" && parse_int(p[1], l) && p[2] == "ffn" &&
                    p[3] == "experts" && parse_int(p[4], e),
                kCorruptFile, "{}: bank key '{}' is not layers.<L>.ffn.experts.<E>.<w>.<tensor>",
                path, info.name);
    if (l != layer) continue;
    idx->by_expert[e].emplace_back(std::string(p[5]) + "." + std::string(p[6]),
                                   idx->file->view(info));
  }
  return files_.emplace(path, std::move(idx)).first->second.get();
}

void ExpertBank::check_dims(const BankExpert& e) {
  const Exl3Tensor& g = e.proj[0];
  if (hidden_ == 0) hidden_ = g.k;
  if (inter_ == 0) inter_ = g.n;
  for (int p = 0; p < 3; ++p) {
    const Exl3Tensor& t = e.proj[p];
    const bool down = p == static_cast<int>(ExpertProj::kDown);
    const int64_t want_k = down ? inter_ : hidden_, want_n = down ? hidden_ : inter_;
    DSV41_CHECK(t.k == want_k && t.n == want_n, kCorruptFile,
                "{}: '{}' is (in {}, out {}), expected (in {}, out {}) (hidden {}, inter {}{}{})",
                t.origin, t.prefix, t.k, t.n, want_k, want_n, hidden_, inter_,
                options_.dims_from.empty() ? "" : ": ", options_.dims_from);
    DSV41_CHECK(t.K == e.K, kCorruptFile,
                "{}: '{}' has K = {} (trellis last dim {}) but the plan {} says K{} for layer {} "
                "expert {}",
                t.origin, t.prefix, t.K, 16 * t.K, plan_.path, e.K, e.layer, e.expert);
  }
}

void ExpertBank::resolve_layer(int layer) {
  std::map<int, std::vector<int>> wanted;  // K -> experts
  for (int e = range_.first; e < range_.last; ++e) {
    const std::string st = plan_.state(layer, e);
    const int k = state_bits(st, fmt::format("{}: layer {} expert {}", plan_.path, layer, e));
    if (k != kNativeState) wanted[k].push_back(e);
  }
  for (const auto& [K, experts] : wanted) {
    std::map<int, const FileIndex*> source;
    std::vector<std::string> searched;
    for (const BankRoot& root : roots_) {
      for (const char* suffix : {".safetensors", ".part.safetensors"}) {
        const std::string path = fmt::format("{}/K{}/L{:02d}{}", root.path, K, layer, suffix);
        searched.push_back(path);
        const FileIndex* idx = file_index(path, layer);
        if (!idx) continue;
        for (int e : experts)
          if (!source.count(e) && idx->by_expert.count(e)) source[e] = idx;
      }
    }
    for (int e : experts) {
      auto it = source.find(e);
      DSV41_CHECK(it != source.end(), kNotFound,
                  "{}: layer {} expert {} (state K{}) is in no bank file; searched: {}", plan_.path,
                  layer, e, K, fmt::join(searched, ", "));
      const FileIndex& idx = *it->second;
      std::array<std::vector<std::pair<std::string, TensorView>>, 3> parts;
      for (const auto& [name, view] : idx.by_expert.at(e)) {
        const size_t dot = name.find('.');
        const int p = proj_index(std::string_view(name).substr(0, dot));
        DSV41_CHECK(p >= 0, kCorruptFile,
                    "{}: 'layers.{}.ffn.experts.{}.{}': unknown projection (expected w1, w3, w2)",
                    idx.file->path(), layer, e, name);
        parts[p].emplace_back(name.substr(dot + 1), view);
      }
      BankExpert be;
      be.layer = layer;
      be.expert = e;
      be.K = K;
      be.file = idx.file->path();
      for (int p = 0; p < 3; ++p) {
        const std::string prefix = fmt::format("layers.{}.ffn.experts.{}.{}", layer, e,
                                               proj_key(static_cast<ExpertProj>(p)));
        be.proj[p] = parse_exl3_tensor(prefix, parts[p], be.file);
      }
      check_dims(be);
      experts_.emplace(std::make_pair(layer, e), std::move(be));
    }
  }
}

std::unique_ptr<ExpertBank> ExpertBank::open(const std::string& model_dir, AllocationPlan plan,
                                             const Options& options) {
  auto bank = std::unique_ptr<ExpertBank>(new ExpertBank());
  bank->model_dir_ = model_dir;
  bank->plan_ = std::move(plan);
  bank->options_ = options;
  bank->range_ = expert_range(options.n_experts, options.world, options.rank);
  bank->hidden_ = options.hidden;
  bank->inter_ = options.inter;
  for (const auto& [l, st] : bank->plan_.expert_state)
    for (const auto& [e, s] : st)
      DSV41_CHECK(e < options.n_experts, kCorruptFile,
                  "{}: expert_state names expert {} of layer {}, but layers have {} experts",
                  bank->plan_.path, e, l, options.n_experts);
  for (const auto& [l, experts] : bank->plan_.keep_native)
    for (int e : experts)
      DSV41_CHECK(e < options.n_experts, kCorruptFile,
                  "{}: keep_native names expert {} of layer {}, but layers have {} experts",
                  bank->plan_.path, e, l, options.n_experts);
  bank->roots_ = resolve_bank_roots(bank->plan_, model_dir);
  for (const auto& [layer, unused] : bank->plan_.layers) bank->resolve_layer(layer);
  return bank;
}

const BankExpert* ExpertBank::find(int layer, int expert) const {
  auto it = experts_.find({layer, expert});
  return it == experts_.end() ? nullptr : &it->second;
}

std::map<int, std::vector<int>> ExpertBank::experts_by_k(int layer) const {
  std::map<int, std::vector<int>> out;
  for (auto it = experts_.lower_bound({layer, 0}); it != experts_.end() && it->first.first == layer;
       ++it)
    out[it->second.K].push_back(it->first.second);
  return out;
}

uint64_t ExpertBank::bytes_in(ExpertRange range) const {
  uint64_t total = 0;
  for (const auto& [key, e] : experts_)
    if (range.contains(key.second)) total += e.bytes();
  return total;
}

}  // namespace dsv41::exl3
