// write_tensor_files: headers first (each file sized with ftruncate), then one job per 32 MiB of
// each tensor, taken from a shared counter by all hardware threads.
#include "synthetic/tensor_files.hpp"

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

struct Open {
  std::string path;
  uint64_t data_start = 0;  // 8 + header size
  int fd = -1;
};

struct Job {
  size_t tensor = 0;
  uint64_t begin = 0, end = 0;  // byte range inside the tensor
  uint64_t chunk = 0;
};

std::string header_json(const std::vector<SyntheticTensor>& ts, const TensorFile& f,
                        std::vector<uint64_t>* offset) {
  std::string j = R"({"__metadata__":{"format":"pt"})";
  uint64_t at = 0;
  for (size_t i : f.tensors) {
    const SyntheticTensor& t = ts[i];
    (*offset)[i] = at;
    j += fmt::format(R"(,"{}":{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", t.name,
                     dtype_name(t.dtype), fmt::join(t.shape, ","), at, at + t.nbytes());
    at += t.nbytes();
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

uint64_t stream_seed(uint64_t seed, size_t tensor, uint64_t chunk) {
  uint64_t s = seed ^ 0x6A09E667F3BCC909ull;
  splitmix64(&s);
  s ^= static_cast<uint64_t>(tensor) * 0x9E3779B97F4A7C15ull;
  splitmix64(&s);
  s ^= chunk * 0xC2B2AE3D27D4EB4Full;
  return splitmix64(&s);
}

}  // namespace

void write_text_file(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  DSV41_CHECK(!ec, kIo, "{}: cannot create the directory: {}", path, ec.message());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  DSV41_CHECK(out.good(), kIo, "{}: cannot write", path);
}

void write_tensor_files(const std::vector<SyntheticTensor>& ts,
                        const std::vector<TensorFile>& files, uint64_t seed) {
  std::vector<uint64_t> offset(ts.size(), 0);  // inside its file's data section
  std::vector<size_t> file_of(ts.size(), files.size());
  std::vector<Open> open(files.size());
  // Closes every file on all paths; the first close error is reported on success paths.
  struct Closer {
    std::vector<Open>* files;
    ~Closer() {
      for (Open& f : *files)
        if (f.fd >= 0) ::close(f.fd);
    }
  } closer{&open};

  for (size_t k = 0; k < files.size(); ++k) {
    const std::string header = header_json(ts, files[k], &offset);
    uint64_t data = 0;
    for (size_t i : files[k].tensors) {
      file_of[i] = k;
      data += ts[i].nbytes();
    }
    Open& f = open[k];
    f.path = files[k].path;
    f.data_start = 8 + header.size();
    f.fd = ::open(f.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    DSV41_CHECK(f.fd >= 0, kIo, "{}: cannot open for writing: {}", f.path, std::strerror(errno));
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(header.size() >> (8 * i));
    pwrite_all(f.fd, len, 8, 0, f.path);
    pwrite_all(f.fd, reinterpret_cast<const uint8_t*>(header.data()), header.size(), 8, f.path);
    const uint64_t total = f.data_start + data;
    DSV41_CHECK(::ftruncate(f.fd, static_cast<off_t>(total)) == 0, kIo,
                "{}: cannot size the file to {} bytes: {}", f.path, total, std::strerror(errno));
  }

  // One generator table per distinct (dtype, fill, value, sigma): ~25 for any geometry.
  using Key = std::tuple<int, int, double, double>;
  std::map<Key, ValueTable> tables;
  std::vector<const ValueTable*> table_of(ts.size(), nullptr);
  std::vector<Job> jobs;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (file_of[i] == files.size()) continue;
    const SyntheticTensor& t = ts[i];
    const Key k{static_cast<int>(t.dtype), static_cast<int>(t.fill), t.value, t.sigma};
    auto it = tables.find(k);
    if (it == tables.end()) it = tables.emplace(k, ValueTable::make(t)).first;
    table_of[i] = &it->second;
    const uint64_t n = t.nbytes();
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
        const Open& f = open[file_of[job.tensor]];
        pwrite_all(f.fd, buf.data(), n, f.data_start + offset[job.tensor] + job.begin, f.path);
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

  for (Open& f : open) {
    const int fd = f.fd;
    f.fd = -1;
    DSV41_CHECK(::close(fd) == 0, kIo, "{}: close failed: {}", f.path, std::strerror(errno));
  }
}

}  // namespace dsv41::synth
