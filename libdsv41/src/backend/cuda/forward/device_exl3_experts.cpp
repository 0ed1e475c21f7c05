#include "backend/cuda/forward/device_exl3_experts.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.hpp"
#include "dsv41k/moe.hpp"
#include "exl3/expert_store.hpp"
#include "quant/dtype.hpp"

namespace dsv41::cuda {
namespace {

constexpr size_t kAlign = 256;  // every piece starts 256-byte aligned (the kernel needs 16)
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

size_t trellis_bytes(const exl3::Exl3Tensor& t) {
  return static_cast<size_t>(t.k) * static_cast<size_t>(t.n) * static_cast<size_t>(t.K) / 8;
}

// fp16 bits of a sign·scale vector: F16 `suh`/`svh` as stored, legacy packed signs as ±1.0.
std::vector<uint16_t> sign_scale_f16(const exl3::SignScale& s) {
  std::vector<uint16_t> h(static_cast<size_t>(s.length));
  if (!s.packed_signs) {
    std::memcpy(h.data(), s.data, h.size() * 2);
    return h;
  }
  std::vector<float> f(h.size());
  s.to_f32(f.data());
  for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_f16(f[i]);  // exact: ±1
  return h;
}

}  // namespace

DeviceExl3Experts DeviceExl3Experts::upload(const exl3::ExpertBank& bank, int layer,
                                            int expert_begin, int expert_end, int64_t hidden,
                                            int64_t inter) {
  using exl3::ExpertProj;
  DeviceExl3Experts d;
  const int n_experts = expert_end - expert_begin;
  d.first_ = expert_begin;
  d.n_experts_ = n_experts;
  d.hidden_p_ = exl3::pad128(hidden);
  d.inter_p_ = exl3::pad128(inter);
  d.present_.assign(static_cast<size_t>(n_experts), false);
  std::array<std::vector<kernels::Exl3MoeMatrix>, 3> records;
  for (auto& r : records) r.assign(static_cast<size_t>(n_experts), {});
  for (int e = 0; e < n_experts; ++e) {  // local index e = expert expert_begin + e
    const exl3::BankExpert* be = bank.find(layer, expert_begin + e);
    if (be == nullptr) continue;
    // Layout of the expert's allocation: per projection trellis, suh, svh (256-byte aligned).
    std::array<size_t, 9> off{};
    size_t total = 0;
    for (int p = 0; p < 3; ++p) {
      const exl3::Exl3Tensor& t = be->proj[p];
      const bool down = static_cast<ExpertProj>(p) == ExpertProj::kDown;
      const int64_t want_k = down ? d.inter_p_ : d.hidden_p_;
      const int64_t want_n = down ? d.hidden_p_ : d.inter_p_;
      DSV41_CHECK(t.k == want_k && t.n == want_n, kCorruptFile,
                  "{} ({}): EXL3 matrix is {} x {}, the model's projection needs {} x {} "
                  "(pad128 of in {} and out {})",
                  t.prefix, t.origin, t.k, t.n, want_k, want_n, down ? inter : hidden,
                  down ? hidden : inter);
      DSV41_CHECK(t.codebook == exl3::Codebook::kMul1, kUnsupported,
                  "{} ({}): codebook {}; the CUDA MoE decodes MUL1 (the Spark checkpoint's) only",
                  t.prefix, t.origin, exl3::codebook_name(t.codebook));
      DSV41_CHECK(t.K >= 2 && t.K <= kernels::kMoeExl3MaxK, kUnsupported,
                  "{} ({}): K = {} bits per weight; the CUDA MoE runs K 2..{}", t.prefix, t.origin,
                  t.K, kernels::kMoeExl3MaxK);
      DSV41_CHECK(t.bias == nullptr, kUnsupported,
                  "{} ({}): an expert projection with a bias; the CUDA MoE has none", t.prefix,
                  t.origin);
      off[3 * p] = total;
      total = align_up(total + trellis_bytes(t));
      off[3 * p + 1] = total;
      total = align_up(total + static_cast<size_t>(t.k) * 2);
      off[3 * p + 2] = total;
      total = align_up(total + static_cast<size_t>(t.n) * 2);
    }
    DeviceBuffer buf(total);
    for (int p = 0; p < 3; ++p) {
      const exl3::Exl3Tensor& t = be->proj[p];
      buf.upload_at(off[3 * p], t.trellis, trellis_bytes(t));  // straight from the mapping
      const std::vector<uint16_t> suh = sign_scale_f16(t.suh), svh = sign_scale_f16(t.svh);
      buf.upload_at(off[3 * p + 1], suh.data(), suh.size() * 2);
      buf.upload_at(off[3 * p + 2], svh.data(), svh.size() * 2);
      const uint8_t* base = buf.as<uint8_t>();
      records[p][e] = {base + off[3 * p], reinterpret_cast<const uint16_t*>(base + off[3 * p + 1]),
                       reinterpret_cast<const uint16_t*>(base + off[3 * p + 2]), t.K, 0};
      d.max_k_ = std::max(d.max_k_, t.K);
      d.expert_bytes_ += trellis_bytes(t) + static_cast<uint64_t>(t.k + t.n) * 2;
    }
    d.experts_.push_back(std::move(buf));
    d.present_[e] = true;
    ++d.count_;
  }
  if (d.count_ == 0) return d;
  const size_t rec_bytes = static_cast<size_t>(n_experts) * sizeof(kernels::Exl3MoeMatrix);
  for (int p = 0; p < 3; ++p) {
    d.records_[p] = DeviceBuffer(rec_bytes);
    d.records_[p].upload(records[p].data(), rec_bytes);
    std::vector<const uint8_t*> table(static_cast<size_t>(n_experts), nullptr);
    const auto* rec = d.records_[p].as<const kernels::Exl3MoeMatrix>();
    for (int e = 0; e < n_experts; ++e)
      if (d.present_[e]) table[e] = reinterpret_cast<const uint8_t*>(rec + e);
    d.tables_[p] = DeviceBuffer(table.size() * sizeof(const uint8_t*));
    d.tables_[p].upload(table.data(), table.size() * sizeof(const uint8_t*));
  }
  return d;
}

uint64_t DeviceExl3Experts::device_bytes() const {
  uint64_t b = 0;
  for (const DeviceBuffer& e : experts_) b += e.bytes();
  for (int p = 0; p < 3; ++p) b += records_[p].bytes() + tables_[p].bytes();
  return b;
}

}  // namespace dsv41::cuda
