// safetensors parsing (bounds-checked), views, fp32 conversion and writing.
#include "loader/safetensors.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/check.hpp"

namespace dsv41 {

namespace {
// Real checkpoints have headers of a few MB (the 96k-tensor release: ~9 MB over 48 shards).
constexpr uint64_t kMaxHeaderBytes = uint64_t{256} << 20;
constexpr size_t kMaxJsonDepth = 8;

bool mul_overflow(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsHeader SafetensorsHeader::parse(const uint8_t* data, size_t size,
                                           const std::string& origin) {
  DSV41_CHECK(size >= 8, kCorruptFile, "{}: truncated: {} bytes, need at least 8", origin, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  DSV41_CHECK(n <= kMaxHeaderBytes, kCorruptFile, "{}: header length {} exceeds the {} limit",
              origin, n, kMaxHeaderBytes);
  DSV41_CHECK(n <= size - 8, kCorruptFile, "{}: header length {} exceeds the file size {}", origin,
              n, size);
  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_size = size - h.data_start;

  simdjson::dom::parser parser;
  DSV41_CHECK(parser.allocate(n + simdjson::SIMDJSON_PADDING, kMaxJsonDepth) == simdjson::SUCCESS,
              kCorruptFile, "{}: header of {} bytes cannot be parsed", origin, n);
  simdjson::padded_string json(reinterpret_cast<const char*>(data + 8), n);
  simdjson::dom::element root;
  auto err = parser.parse(json).get(root);
  DSV41_CHECK(!err, kCorruptFile, "{}: header is not valid JSON: {}", origin,
              simdjson::error_message(err));
  simdjson::dom::object obj;
  DSV41_CHECK(!root.get_object().get(obj), kCorruptFile, "{}: header is not a JSON object", origin);

  std::map<std::string, bool> seen;
  for (auto field : obj) {
    std::string name(field.key);
    DSV41_CHECK(seen.emplace(name, true).second, kCorruptFile, "{}: duplicate entry '{}'", origin,
                name);
    if (name == "__metadata__") {
      simdjson::dom::object meta;
      DSV41_CHECK(!field.value.get_object().get(meta), kCorruptFile,
                  "{}: __metadata__ is not an object", origin);
      for (auto m : meta) {
        std::string_view v;
        DSV41_CHECK(!m.value.get_string().get(v), kCorruptFile,
                    "{}: __metadata__.{} is not a string", origin, std::string(m.key));
        h.metadata[std::string(m.key)] = std::string(v);
      }
      continue;
    }
    simdjson::dom::object t;
    DSV41_CHECK(!field.value.get_object().get(t), kCorruptFile,
                "{}: tensor '{}': entry is not an object", origin, name);
    TensorInfo info;
    info.name = name;
    std::string_view dtype;
    DSV41_CHECK(!t["dtype"].get_string().get(dtype), kCorruptFile,
                "{}: tensor '{}': missing or non-string dtype", origin, name);
    auto dt = dtype_from_name(dtype);
    DSV41_CHECK(dt.has_value(), kCorruptFile, "{}: tensor '{}': unsupported dtype '{}'", origin,
                name, std::string(dtype));
    info.dtype = *dt;
    simdjson::dom::array shape;
    DSV41_CHECK(!t["shape"].get_array().get(shape), kCorruptFile,
                "{}: tensor '{}': missing or non-array shape", origin, name);
    // numel: the element count; nonzero: the product of the nonzero dims, which bounds every
    // prefix product TensorInfo::numel() forms in int64 ([2^62, 3, 0] has 0 elements but
    // overflowed there).
    uint64_t numel = 1, nonzero = 1;
    for (auto d : shape) {
      int64_t v;
      DSV41_CHECK(!d.get_int64().get(v) && v >= 0, kCorruptFile,
                  "{}: tensor '{}': shape entries must be non-negative integers", origin, name);
      DSV41_CHECK(!mul_overflow(numel, static_cast<uint64_t>(v), &numel) &&
                      (v == 0 || (!mul_overflow(nonzero, static_cast<uint64_t>(v), &nonzero) &&
                                  nonzero <= static_cast<uint64_t>(INT64_MAX))),
                  kCorruptFile, "{}: tensor '{}': shape overflows", origin, name);
      info.shape.push_back(v);
    }
    simdjson::dom::array offs;
    DSV41_CHECK(!t["data_offsets"].get_array().get(offs) && offs.size() == 2, kCorruptFile,
                "{}: tensor '{}': data_offsets must be [begin, end]", origin, name);
    uint64_t begin, end;
    DSV41_CHECK(!offs.at(0).get_uint64().get(begin) && !offs.at(1).get_uint64().get(end),
                kCorruptFile, "{}: tensor '{}': data_offsets must be non-negative integers", origin,
                name);
    DSV41_CHECK(begin <= end && end <= data_size, kCorruptFile,
                "{}: tensor '{}': data_offsets [{}, {}] outside the data section of {} bytes",
                origin, name, begin, end, data_size);
    uint64_t expect;
    DSV41_CHECK(!mul_overflow(numel, dtype_size(info.dtype), &expect) && expect == end - begin,
                kCorruptFile, "{}: tensor '{}': {} {} elements need {} bytes, data_offsets span {}",
                origin, name, numel, dtype_name(info.dtype), numel * dtype_size(info.dtype),
                end - begin);
    info.offset = begin;
    info.nbytes = end - begin;
    h.tensors.push_back(std::move(info));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.offset < b.offset; });
  // Empty tensors overlap nothing; every other one must start at or past the furthest end so far
  // (not only its sorted neighbour's: an empty tensor between two overlapping ones hid them).
  const TensorInfo* furthest = nullptr;
  for (const TensorInfo& c : h.tensors) {
    if (c.nbytes == 0) continue;
    DSV41_CHECK(furthest == nullptr || furthest->offset + furthest->nbytes <= c.offset,
                kCorruptFile, "{}: tensors '{}' and '{}' overlap", origin, furthest->name, c.name);
    if (furthest == nullptr || c.offset + c.nbytes > furthest->offset + furthest->nbytes)
      furthest = &c;
  }
  return h;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  f->map_ = MappedFile(path);
  f->header_ = SafetensorsHeader::parse(f->map_.data(), f->map_.size(), path);
  for (size_t i = 0; i < f->header_.tensors.size(); ++i)
    f->by_name_[f->header_.tensors[i].name] = i;
  return f;
}

const TensorInfo* SafetensorsFile::find_info(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& info) const {
  return TensorView{&info, map_.data() + header_.data_start + info.offset, &map_.path()};
}

std::vector<float> tensor_to_f32(const TensorView& t) {
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  const uint8_t* p = t.data;
  auto load = [&](auto tag, size_t i) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    return v;
  };
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::kBF16:
        out[i] = bf16_to_f32(load(uint16_t{}, i));
        break;
      case DType::kF16:
        out[i] = f16_to_f32(load(uint16_t{}, i));
        break;
      case DType::kF32:
        out[i] = load(float{}, i);
        break;
      case DType::kF64:
        out[i] = static_cast<float>(load(double{}, i));
        break;
      case DType::kI8:
        out[i] = load(int8_t{}, i);
        break;
      case DType::kI16:
        out[i] = load(int16_t{}, i);
        break;
      case DType::kI32:
        out[i] = static_cast<float>(load(int32_t{}, i));
        break;
      case DType::kI64:
        out[i] = static_cast<float>(load(int64_t{}, i));
        break;
      case DType::kU8:
        out[i] = p[i];
        break;
      case DType::kF8E4M3:
        out[i] = e4m3_to_f32(p[i]);
        break;
      case DType::kF8E8M0:
        out[i] = e8m0_to_f32(p[i]);
        break;
    }
  }
  return out;
}

namespace {
void json_escape(std::string* out, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
    } else {
      out->push_back(c);
    }
  }
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string json = "{";
  bool first = true;
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata) {
      if (!first) json += ",";
      first = false;
      json += "\"";
      json_escape(&json, k);
      json += "\":\"";
      json_escape(&json, v);
      json += "\"";
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    int64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    DSV41_CHECK(static_cast<uint64_t>(numel) * dtype_size(t.dtype) == t.bytes.size(),
                kInvalidArgument, "{}: tensor '{}' has {} bytes, shape needs {}", path, t.name,
                t.bytes.size(), numel * dtype_size(t.dtype));
    if (!metadata.empty() || &t != &tensors.front()) json += ",";
    json += "\"";
    json_escape(&json, t.name);
    json += "\":{\"dtype\":\"" + std::string(dtype_name(t.dtype)) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) json += (i ? "," : "") + std::to_string(t.shape[i]);
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  json += "}";
  while (json.size() % 8 != 0) json += ' ';
  FILE* f = std::fopen(path.c_str(), "wb");
  DSV41_CHECK(f != nullptr, kIo, "{}: cannot open for writing", path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(json.size() >> (8 * i));
  bool ok =
      std::fwrite(len, 1, 8, f) == 8 && std::fwrite(json.data(), 1, json.size(), f) == json.size();
  for (const auto& t : tensors)
    ok = ok &&
         (t.bytes.empty() || std::fwrite(t.bytes.data(), 1, t.bytes.size(), f) == t.bytes.size());
  ok = (std::fclose(f) == 0) && ok;
  DSV41_CHECK(ok, kIo, "{}: write failed", path);
}

}  // namespace dsv41
