#include "auth/api_key.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>

namespace dsv41::server {

namespace {

// 32 random bytes = 256 bits, written as 64 hex characters.
constexpr size_t kKeyBytes = 32;

Result<std::string> random_hex(size_t n) {
  std::string raw(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(raw.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status(ErrorCode::kIo, fmt::format("getrandom failed: {}", std::strerror(errno)));
    }
    got += static_cast<size_t>(r);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Compare every byte of `a` against `b` cycled, and fold the length difference in, so neither
  // the position of the first mismatch nor the shorter length shortens the loop.
  unsigned diff = static_cast<unsigned>(a.size() ^ b.size());
  const size_t n = a.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char y = b.empty() ? 0 : static_cast<unsigned char>(b[i % b.size()]);
    diff |= static_cast<unsigned char>(a[i]) ^ y;
  }
  return diff == 0;
}

bool ApiKey::check(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view given;
  if (authorization.size() >= kBearer.size() &&
      strncasecmp(authorization.data(), kBearer.data(), kBearer.size()) == 0) {
    given = authorization.substr(kBearer.size());
  }
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  return constant_time_equal(given, key_) && !key_.empty();
}

Result<ApiKey> ApiKey::load_or_create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    Result<std::string> key = random_hex(kKeyBytes);
    if (!key) {
      ::close(fd);
      ::unlink(path.c_str());
      return key.status();
    }
    const std::string line = *key + "\n";
    const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!ok) {
      ::unlink(path.c_str());
      return Status(ErrorCode::kIo, fmt::format("{}: cannot write the generated API key", path));
    }
    return ApiKey(std::move(*key));
  }
  if (errno != EEXIST)
    return Status(ErrorCode::kIo,
                  fmt::format("{}: cannot create the API key file: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status(ErrorCode::kIo, fmt::format("{}: {}", path, std::strerror(errno)));
  if ((st.st_mode & 077) != 0)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("{}: API key file mode is {:o}; it must not be readable by group or "
                              "others (chmod 600)",
                              path, st.st_mode & 0777));
  std::ifstream in(path);
  std::string key;
  if (!in || !std::getline(in, key))
    return Status(ErrorCode::kIo, fmt::format("{}: cannot read the API key file", path));
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty())
    return Status(ErrorCode::kInvalidArgument, fmt::format("{}: API key file is empty", path));
  return ApiKey(std::move(key));
}

}  // namespace dsv41::server
