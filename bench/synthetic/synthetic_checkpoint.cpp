// write_synthetic_checkpoint: lays the tensors out over shards (in file order, a new shard when
// the next tensor would pass shard_bytes), writes every header first, then generates 32 MiB
// chunks on all hardware threads and pwrite()s each at its final offset. Chunk c of tensor i
// draws from the splitmix64 stream seeded by (seed, i, c), so the bytes do not depend on the
// thread count or order.
#include "synthetic/synthetic_checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "core/check.hpp"
#include "synthetic/value_table.hpp"

namespace dsv41::synth {
namespace {

constexpr uint64_t kChunkBytes = uint64_t{32} << 20;  // a multiple of every element size

struct Placed {
  int shard = 0;
  uint64_t offset = 0;  // from the start of the shard's data section
};

struct Shard {
  std::string name, path;
  std::string header;  // padded JSON
  uint64_t data_bytes = 0;
  int fd = -1;
};

struct Job {
  size_t tensor = 0;
  uint64_t begin = 0, end = 0;  // byte range inside the tensor
  uint64_t chunk = 0;
};

std::string shard_name(int i, int n) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
}

// Same layout as loader/safetensors.cpp write_safetensors: metadata first, tensors in data order,
// padded with spaces to a multiple of 8.
std::string header_json(const std::vector<SyntheticTensor>& ts, const std::vector<Placed>& at,
                        int shard) {
  std::string j = R"({"__metadata__":{"format":"pt"})";
  for (size_t i = 0; i < ts.size(); ++i) {
    if (at[i].shard != shard) continue;
    const SyntheticTensor& t = ts[i];
    j += fmt::format(R"(,"{}":{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", t.name,
                     dtype_name(t.dtype), fmt::join(t.shape, ","), at[i].offset,
                     at[i].offset + t.nbytes());
  }
  j += "}";
  while (j.size() % 8 != 0) j += ' ';
  return j;
}

void pwrite_all(int fd, const uint8_t* p, uint64_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    DSV41_CHECK(w > 0, kIo, "{}: write of {} bytes at {} failed: {}", path, n, off,
                std::strerror(errno));
    p += w;
    n -= static_cast<uint64_t>(w);
    off += static_cast<uint64_t>(w);
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  DSV41_CHECK(out.good(), kIo, "{}: cannot write", path);
}

uint64_t stream_seed(uint64_t seed, size_t tensor, uint64_t chunk) {
  uint64_t s = seed ^ 0x6A09E667F3BCC909ull;
  splitmix64(&s);
  s ^= static_cast<uint64_t>(tensor) * 0x9E3779B97F4A7C15ull;
  splitmix64(&s);
  s ^= chunk * 0xC2B2AE3D27D4EB4Full;
  return splitmix64(&s);
}

}  // namespace

void write_synthetic_checkpoint(const std::string& dir, const SyntheticGeometry& g, uint64_t seed) {
  const std::vector<SyntheticTensor> ts = synthetic_tensors(g);
  std::vector<Placed> at(ts.size());
  std::vector<uint64_t> shard_bytes(1, 0);
  for (size_t i = 0; i < ts.size(); ++i) {
    const uint64_t n = ts[i].nbytes();
    if (shard_bytes.back() > 0 && shard_bytes.back() + n > g.shard_bytes) shard_bytes.push_back(0);
    at[i] = {static_cast<int>(shard_bytes.size() - 1), shard_bytes.back()};
    shard_bytes.back() += n;
  }
  const int n_shards = static_cast<int>(shard_bytes.size());

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  DSV41_CHECK(!ec, kIo, "{}: cannot create the directory: {}", dir, ec.message());
  write_text(dir + "/config.json", synthetic_config_json(g));

  std::vector<Shard> shards(n_shards);
  for (int s = 0; s < n_shards; ++s) {
    Shard& sh = shards[s];
    sh.name = shard_name(s, n_shards);
    sh.path = dir + "/" + sh.name;
    sh.header = header_json(ts, at, s);
    sh.data_bytes = shard_bytes[s];
    sh.fd = ::open(sh.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    DSV41_CHECK(sh.fd >= 0, kIo, "{}: cannot open for writing: {}", sh.path, std::strerror(errno));
  }
  // Closes every shard on all paths; the first close error is reported on success paths.
  struct Closer {
    std::vector<Shard>* shards;
    ~Closer() {
      for (Shard& s : *shards)
        if (s.fd >= 0) ::close(s.fd);
    }
  } closer{&shards};

  for (Shard& sh : shards) {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(sh.header.size() >> (8 * i));
    pwrite_all(sh.fd, len, 8, 0, sh.path);
    pwrite_all(sh.fd, reinterpret_cast<const uint8_t*>(sh.header.data()), sh.header.size(), 8,
               sh.path);
    const uint64_t total = 8 + sh.header.size() + sh.data_bytes;
    DSV41_CHECK(::ftruncate(sh.fd, static_cast<off_t>(total)) == 0, kIo,
                "{}: cannot size the file to {} bytes: {}", sh.path, total, std::strerror(errno));
  }

  // One generator table per distinct (dtype, fill, value, sigma): ~20 for any geometry.
  using Key = std::tuple<int, int, double, double>;
  std::map<Key, ValueTable> tables;
  std::vector<const ValueTable*> table_of(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const SyntheticTensor& t = ts[i];
    const Key k{static_cast<int>(t.dtype), static_cast<int>(t.fill), t.value, t.sigma};
    auto it = tables.find(k);
    if (it == tables.end()) it = tables.emplace(k, ValueTable::make(t)).first;
    table_of[i] = &it->second;
  }

  std::vector<Job> jobs;
  for (size_t i = 0; i < ts.size(); ++i) {
    const uint64_t n = ts[i].nbytes();
    for (uint64_t b = 0, c = 0; b < n; b += kChunkBytes, ++c)
      jobs.push_back({i, b, std::min(n, b + kChunkBytes), c});
  }

  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  const auto worker = [&] {
    std::vector<uint8_t> buf;
    try {
      for (size_t j = next++; j < jobs.size() && !failed; j = next++) {
        const Job& job = jobs[j];
        const uint64_t n = job.end - job.begin;
        if (buf.size() < n) buf.resize(n);
        table_of[job.tensor]->fill(buf.data(), n, stream_seed(seed, job.tensor, job.chunk));
        const Shard& sh = shards[at[job.tensor].shard];
        pwrite_all(sh.fd, buf.data(), n, 8 + sh.header.size() + at[job.tensor].offset + job.begin,
                   sh.path);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  const size_t n_threads =
      std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), jobs.size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < n_threads; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);

  for (Shard& sh : shards) {
    const int fd = sh.fd;
    sh.fd = -1;
    DSV41_CHECK(::close(fd) == 0, kIo, "{}: close failed: {}", sh.path, std::strerror(errno));
  }

  std::map<std::string, std::string> weight_map;
  uint64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    weight_map[ts[i].name] = shards[at[i].shard].name;
    total += ts[i].nbytes();
  }
  std::string idx = fmt::format("{{\n  \"metadata\": {{\n    \"total_size\": {}\n  }},\n", total);
  idx += "  \"weight_map\": {";
  bool first = true;
  for (const auto& [name, file] : weight_map) {
    idx += fmt::format("{}\n    \"{}\": \"{}\"", first ? "" : ",", name, file);
    first = false;
  }
  idx += "\n  }\n}\n";
  write_text(dir + "/model.safetensors.index.json", idx);
}

}  // namespace dsv41::synth
