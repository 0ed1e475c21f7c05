// EXL3 tensor-set validation (spec exl3-format.md §2.2; trellis-serve's build_matrix_spec rejects
// unknown suffixes too).
#include "exl3/exl3_tensor.hpp"

#include <cstring>
#include <map>

#include "core/check.hpp"
#include "exl3/trellis_tile.hpp"
#include "loader/checkpoint.hpp"

namespace dsv41::exl3 {

namespace {

constexpr const char* kKnownSuffixes[] = {"trellis", "suh", "svh",  "su",
                                          "sv",      "mcg", "mul1", "bias"};
constexpr int64_t kDimQuantum = 128;  // Hadamard block: k and n must be multiples (§2.1)

struct Parts {
  const std::string& prefix;
  const std::string& origin;
  std::map<std::string, TensorView> by_suffix;

  const TensorView* find(const char* suffix) const {
    auto it = by_suffix.find(suffix);
    return it == by_suffix.end() ? nullptr : &it->second;
  }
  std::string name(const char* suffix) const { return prefix + "." + suffix; }

  void expect(const TensorView& t, const char* suffix, DType dtype,
              const std::vector<int64_t>& shape) const {
    DSV41_CHECK(t.dtype() == dtype && t.shape() == shape, kCorruptFile,
                "{}: EXL3 tensor '{}': expected {} {}, found {} {}", origin, name(suffix),
                dtype_name(dtype), shape_string(shape), dtype_name(t.dtype()),
                shape_string(t.shape()));
  }

  // suh (F16 [len]) or legacy su (I16 [len/16]); exactly one must exist.
  SignScale sign_scale(const char* f16_name, const char* packed_name, int64_t len) const {
    const TensorView* f = find(f16_name);
    const TensorView* p = find(packed_name);
    DSV41_CHECK(f || p, kCorruptFile, "{}: EXL3 tensor '{}': missing '{}' (or legacy '{}')", origin,
                prefix, name(f16_name), name(packed_name));
    DSV41_CHECK(!(f && p), kCorruptFile, "{}: EXL3 tensor '{}': both '{}' and legacy '{}' present",
                origin, prefix, name(f16_name), name(packed_name));
    SignScale s;
    s.length = len;
    if (f) {
      expect(*f, f16_name, DType::kF16, {len});
      s.data = f->data;
    } else {
      expect(*p, packed_name, DType::kI16, {len / 16});
      s.data = p->data;
      s.packed_signs = true;
    }
    return s;
  }
};

Codebook marker(const Parts& parts) {
  const TensorView* mcg = parts.find("mcg");
  const TensorView* mul1 = parts.find("mul1");
  DSV41_CHECK(!(mcg && mul1), kCorruptFile,
              "{}: EXL3 tensor '{}': both codebook markers '{}' and '{}' present", parts.origin,
              parts.prefix, parts.name("mcg"), parts.name("mul1"));
  const TensorView* m = mcg ? mcg : mul1;
  if (!m) return Codebook::k3Inst;
  const char* suffix = mcg ? "mcg" : "mul1";
  // exllamav3 writes a 0-dim I32 scalar; trellis-serve also accepts shape [1] (§2.2). The value
  // (the old multiplier) is not read.
  DSV41_CHECK(m->dtype() == DType::kI32 && m->numel() == 1 && m->shape().size() <= 1, kCorruptFile,
              "{}: EXL3 tensor '{}': marker must be an I32 scalar, found {} {}", parts.origin,
              parts.name(suffix), dtype_name(m->dtype()), shape_string(m->shape()));
  return mcg ? Codebook::kMcg : Codebook::kMul1;
}

}  // namespace

void SignScale::to_f32(float* out) const {
  if (!packed_signs) {
    for (int64_t i = 0; i < length; ++i) {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      out[i] = f16_to_f32(h);
    }
    return;
  }
  for (int64_t i = 0; i < length; ++i) {
    uint16_t w;
    std::memcpy(&w, data + 2 * (i / 16), 2);
    out[i] = (w >> (i % 16)) & 1 ? -1.0f : 1.0f;
  }
}

Exl3Tensor parse_exl3_tensor(const std::string& prefix,
                             const std::vector<std::pair<std::string, TensorView>>& parts_in,
                             const std::string& origin) {
  Parts parts{prefix, origin, {}};
  uint64_t bytes = 0;
  for (const auto& [suffix, view] : parts_in) {
    bool known = false;
    for (const char* s : kKnownSuffixes) known = known || suffix == s;
    DSV41_CHECK(known, kCorruptFile,
                "{}: EXL3 tensor '{}': unknown tensor '{}' (expected suffixes trellis, suh, svh, "
                "su, sv, mcg, mul1, bias)",
                origin, prefix, parts.name(suffix.c_str()));
    parts.by_suffix.emplace(suffix, view);
    bytes += view.nbytes();
  }
  const TensorView* tr = parts.find("trellis");
  DSV41_CHECK(tr, kNotFound, "{}: no EXL3 tensor at prefix '{}' (no '{}')", origin, prefix,
              parts.name("trellis"));
  DSV41_CHECK(tr->dtype() == DType::kI16 && tr->shape().size() == 3, kCorruptFile,
              "{}: EXL3 tensor '{}': expected I16 [k/16, n/16, 16K], found {} {}", origin,
              parts.name("trellis"), dtype_name(tr->dtype()), shape_string(tr->shape()));
  const auto& sh = tr->shape();
  DSV41_CHECK(sh[2] % 16 == 0, kCorruptFile,
              "{}: EXL3 tensor '{}': last dim {} is not a multiple of 16 (16·K)", origin,
              parts.name("trellis"), sh[2]);
  const int64_t K = sh[2] / 16;
  DSV41_CHECK(K >= kMinBits && K <= kMaxBits, kUnsupported,
              "{}: EXL3 tensor '{}': K = {} (last dim {}) is outside 1..8", origin,
              parts.name("trellis"), K, sh[2]);
  Exl3Tensor t;
  t.prefix = prefix;
  t.origin = origin;
  t.k = 16 * sh[0];
  t.n = 16 * sh[1];
  t.K = static_cast<int>(K);
  DSV41_CHECK(
      t.k > 0 && t.n > 0 && t.k % kDimQuantum == 0 && t.n % kDimQuantum == 0, kCorruptFile,
      "{}: EXL3 tensor '{}': k = {} and n = {} (shape {}) must be positive multiples of 128 "
      "(Hadamard block)",
      origin, parts.name("trellis"), t.k, t.n, shape_string(sh));
  t.trellis = tr->data;
  t.suh = parts.sign_scale("suh", "su", t.k);
  t.svh = parts.sign_scale("svh", "sv", t.n);
  t.codebook = marker(parts);
  if (const TensorView* b = parts.find("bias")) {
    DSV41_CHECK((b->dtype() == DType::kF16 || b->dtype() == DType::kF32) &&
                    b->shape() == std::vector<int64_t>{t.n},
                kCorruptFile, "{}: EXL3 tensor '{}': expected F16/F32 [{}], found {} {}", origin,
                parts.name("bias"), t.n, dtype_name(b->dtype()), shape_string(b->shape()));
    t.bias = b->data;
    t.bias_dtype = b->dtype();
  }
  t.stored_bytes = bytes;
  return t;
}

Exl3Tensor load_exl3_tensor(const SafetensorsFile& file, const std::string& prefix) {
  const std::string head = prefix + ".";
  std::vector<std::pair<std::string, TensorView>> parts;
  for (const TensorInfo& info : file.header().tensors) {
    if (info.name.compare(0, head.size(), head) == 0)
      parts.emplace_back(info.name.substr(head.size()), file.view(info));
  }
  return parse_exl3_tensor(prefix, parts, file.path());
}

}  // namespace dsv41::exl3
