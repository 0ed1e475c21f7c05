// IbvShim: libibverbs loaded at run time with dlopen (style-models.md §3
// principle 11, the pattern of NCCL's ibvwrap), so libdsv41 links and runs on
// hosts without rdma-core; only the one-shot RDMA all-reduce needs it. Types
// come from <infiniband/verbs.h> (Debian libibverbs-dev); no symbol of
// libibverbs is linked. ibv_post_send / ibv_poll_cq are inline in verbs.h (they
// call through ibv_context::ops) and need no entry here. UNVERIFIED ON
// HARDWARE: loading and symbol resolution are tested; verbs calls are not run
// on RoCE here (docs/tp.md "Unverified on hardware").
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "dsv41/status.hpp"

namespace dsv41::parallel {

struct IbvFunctions {
  ibv_device** (*get_device_list)(int* num_devices);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_port)(ibv_context* context, uint8_t port_num, ibv_port_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector);
  int (*destroy_cq)(ibv_cq* cq);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*destroy_qp)(ibv_qp* qp);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
};

class IbvShim {
 public:
  static constexpr const char* kDefaultLibrary = "libibverbs.so.1";

  // Opens `library` and resolves every IbvFunctions entry. kUnsupported when
  // the library is absent (message: the dlerror text and "install rdma-core /
  // libibverbs1"), kUnsupported naming the first missing symbol when it is too
  // old.
  static Result<std::shared_ptr<const IbvShim>> load(const std::string& library = kDefaultLibrary);

  const IbvFunctions& fn() const { return fn_; }
  const std::string& library() const { return library_; }
  ~IbvShim();
  IbvShim(const IbvShim&) = delete;
  IbvShim& operator=(const IbvShim&) = delete;

 private:
  IbvShim() = default;
  void* handle_ = nullptr;
  std::string library_;
  IbvFunctions fn_{};
};

}  // namespace dsv41::parallel
