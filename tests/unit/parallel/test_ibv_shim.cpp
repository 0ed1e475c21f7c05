// IbvShim: an absent library is a clean kUnsupported; the installed one
// resolves every symbol.
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include "parallel/ibv_shim.hpp"

using namespace dsv41;
using namespace dsv41::parallel;

TEST_CASE("ibv shim: absent library -> kUnsupported naming it", "[unit][parallel]") {
  auto r = IbvShim::load("libdsv41-no-such-ibverbs.so.1");
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().code() == ErrorCode::kUnsupported);
  REQUIRE(r.status().message().find("libdsv41-no-such-ibverbs.so.1") != std::string::npos);
  REQUIRE(r.status().message().find("rdma-core") != std::string::npos);
}

TEST_CASE("ibv shim: a library without verbs symbols names the first missing", "[unit][parallel]") {
  auto r = IbvShim::load("libc.so.6");
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().code() == ErrorCode::kUnsupported);
  REQUIRE(r.status().message().find("lacks symbol ibv_get_device_list") != std::string::npos);
}

TEST_CASE("ibv shim: installed libibverbs resolves the whole table", "[unit][parallel]") {
  void* probe = dlopen(IbvShim::kDefaultLibrary, RTLD_NOW | RTLD_LOCAL);
  if (probe == nullptr) {
    WARN("libibverbs.so.1 not installed on this host: resolution test skipped");
    return;
  }
  dlclose(probe);
  auto r = IbvShim::load();
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  const IbvFunctions& f = (*r)->fn();
  REQUIRE(f.get_device_list != nullptr);
  REQUIRE(f.modify_qp != nullptr);
  REQUIRE(f.reg_mr != nullptr);
  int n = -1;
  ibv_device** list = f.get_device_list(&n);  // no RDMA NIC here: an empty list, not a crash
  REQUIRE(n >= 0);
  if (list != nullptr) f.free_device_list(list);
}
