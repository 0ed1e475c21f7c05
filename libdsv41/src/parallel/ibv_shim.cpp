// IbvShim (ibv_shim.hpp): dlopen + dlsym into a function table.
#include "parallel/ibv_shim.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace dsv41::parallel {

IbvShim::~IbvShim() {
  if (handle_ != nullptr) dlclose(handle_);
}

Result<std::shared_ptr<const IbvShim>> IbvShim::load(const std::string& library) {
  // RTLD_LOCAL: the verbs symbols must not leak into the global namespace,
  // where a different libibverbs loaded by another component (e.g. NCCL's own
  // ibvwrap) could bind to them.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status(ErrorCode::kUnsupported,
                  fmt::format("RDMA all-reduce unavailable: cannot load '{}' ({}); install "
                              "rdma-core (Debian/Ubuntu package libibverbs1) or use the NCCL/TCP "
                              "TpComm",
                              library, err != nullptr ? err : "unknown dlopen error"));
  }
  std::shared_ptr<IbvShim> shim(new IbvShim());
  shim->handle_ = handle;
  shim->library_ = library;
  const char* missing = nullptr;
  auto bind = [&](auto& slot, const char* name) {
    void* sym = dlsym(handle, name);
    if (sym == nullptr && missing == nullptr) missing = name;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(sym);
  };
  IbvFunctions& f = shim->fn_;
  bind(f.get_device_list, "ibv_get_device_list");
  bind(f.free_device_list, "ibv_free_device_list");
  bind(f.get_device_name, "ibv_get_device_name");
  bind(f.open_device, "ibv_open_device");
  bind(f.close_device, "ibv_close_device");
  bind(f.query_port, "ibv_query_port");
  bind(f.query_gid, "ibv_query_gid");
  bind(f.alloc_pd, "ibv_alloc_pd");
  bind(f.dealloc_pd, "ibv_dealloc_pd");
  bind(f.reg_mr, "ibv_reg_mr");
  bind(f.dereg_mr, "ibv_dereg_mr");
  bind(f.create_cq, "ibv_create_cq");
  bind(f.destroy_cq, "ibv_destroy_cq");
  bind(f.create_qp, "ibv_create_qp");
  bind(f.destroy_qp, "ibv_destroy_qp");
  bind(f.modify_qp, "ibv_modify_qp");
  if (missing != nullptr)
    return Status(ErrorCode::kUnsupported,
                  fmt::format("'{}' lacks symbol {} (libibverbs too old for the RDMA all-reduce)",
                              library, missing));
  return std::shared_ptr<const IbvShim>(std::move(shim));
}

}  // namespace dsv41::parallel
