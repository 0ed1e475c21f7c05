// Bearer-key authentication (api-and-clients.md §2.2): one key per server, given literally or read
// from a key file that is generated (32 bytes from getrandom, hex) with mode 0600 when absent.
// Comparison is constant-time in the key's content. docs/server.md "Authentication".
#pragma once

#include <string>
#include <string_view>

#include "dsv41/status.hpp"

namespace dsv41::server {

class ApiKey {
 public:
  explicit ApiKey(std::string key) : key_(std::move(key)) {}

  // Reads the first line of `path`; creates the file (O_EXCL, 0600) with a fresh key when it does
  // not exist. Errors name the path: unreadable, empty, or group/world-readable (mode & 077).
  static Result<ApiKey> load_or_create(const std::string& path);

  // `authorization` is the raw header value; true only for "Bearer <key>" with the exact key.
  bool check(std::string_view authorization) const;
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// Equal-length-independent, data-independent comparison: time depends only on a.size() + b.size().
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace dsv41::server
