// DeviceTp over a TpComm that takes device memory (the TpNccl path of DSV41_TP_NCCL) and over a
// host one, on one GPU: a scripted rank-0 communicator whose peer contributes known values. Both
// paths must give the same sums and gathers; the device path must hand the collective the
// device buffers themselves (the fake checks the pointer kind) after the stream produced them.
// Two ranks over real NCCL need two GPUs (issue 8).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/forward/device_tp.hpp"
#include "kernel_check.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::test {
namespace {

float peer_value(size_t i) { return 0.25f * static_cast<float>(i) - 3.0f; }

bool is_device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice;
}

// Rank 0 of 2; the peer's operand is peer_value(i). Host or device spans per `device`.
class ScriptedComm final : public parallel::TpComm {
 public:
  explicit ScriptedComm(bool device) : device_(device) {}
  int rank() const override { return 0; }
  int world() const override { return 2; }
  bool takes_device_memory() const override { return device_; }
  int calls = 0;
  bool wrong_memory = false;

  Status all_reduce_sum_f32(std::span<float> data, const parallel::CallControl&) override {
    ++calls;
    std::vector<float> v = fetch(data.data(), data.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = v[i] + peer_value(i);  // x_0 + x_1
    store(data.data(), v);
    return Status::ok();
  }
  Status all_reduce_sum_bf16(std::span<uint16_t>, const parallel::CallControl&) override {
    return {ErrorCode::kUnsupported, "not scripted"};
  }
  Status all_gather(std::span<const std::byte> mine, std::span<std::byte> out,
                    const parallel::CallControl&) override {
    ++calls;
    const size_t n = mine.size() / 4;
    std::vector<float> all = fetch(reinterpret_cast<const float*>(mine.data()), n);
    for (size_t i = 0; i < n; ++i) all.push_back(peer_value(i));
    store(reinterpret_cast<float*>(out.data()), all);
    return Status::ok();
  }
  Status broadcast(std::span<std::byte>, int, const parallel::CallControl&) override {
    return {ErrorCode::kUnsupported, "not scripted"};
  }
  Status barrier(const parallel::CallControl&) override { return Status::ok(); }
  void abort(const std::string&) override {}

 private:
  std::vector<float> fetch(const float* p, size_t n) {
    wrong_memory = wrong_memory || is_device_pointer(p) != device_;
    std::vector<float> v(n);
    DSV41_CUDA_CHECK(cudaMemcpy(v.data(), p, n * 4, cudaMemcpyDefault));
    return v;
  }
  void store(float* p, const std::vector<float>& v) {
    wrong_memory = wrong_memory || is_device_pointer(p) != device_;
    DSV41_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyDefault));
  }
  bool device_;
};

}  // namespace

TEST_CASE("DeviceTp gives a device-memory TpComm the device buffers, same results as staging",
          "[kernel][tp]") {
  if (skip_without_gpu()) return;
  constexpr int64_t n = 1000, gather = 300;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::ldexp(1.0f, static_cast<int>(i % 9)) - 0.75f;
  std::vector<std::vector<float>> sums, gathers;
  for (bool device : {false, true}) {
    INFO(fmt::format("takes_device_memory {}", device));
    ScriptedComm comm(device);
    cuda::DeviceTp tp(comm, 4096, 512);
    cuda::CudaStream stream;
    cuda::DeviceBuffer d(n * 4);
    // The operand is produced on the stream right before the call: the call must wait for it.
    d.fill_bytes(0);
    DSV41_CUDA_CHECK(
        cudaMemcpyAsync(d.data(), x.data(), n * 4, cudaMemcpyHostToDevice, stream.get()));
    tp.all_reduce_sum(d.as<float>(), n, stream.get(), "test all-reduce");
    std::vector<float> got(n);
    DSV41_CUDA_CHECK(
        cudaMemcpyAsync(got.data(), d.data(), n * 4, cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    sums.push_back(got);
    const float* all = tp.all_gather(d.as<float>(), gather, stream.get(), "test gather");
    stream.synchronize();
    gathers.emplace_back(all, all + 2 * gather);
    CHECK(comm.calls == 2);
    CHECK_FALSE(comm.wrong_memory);
  }
  for (int64_t i = 0; i < n; ++i) {
    INFO(fmt::format("element {}", i));
    REQUIRE(sums[0][i] == x[i] + peer_value(i));
    REQUIRE(sums[1][i] == sums[0][i]);
  }
  for (int64_t i = 0; i < 2 * gather; ++i) {
    INFO(fmt::format("gathered {}", i));
    const float want = i < gather ? sums[0][i] : peer_value(i - gather);
    REQUIRE(gathers[0][i] == want);
    REQUIRE(gathers[1][i] == want);
  }
}

}  // namespace dsv41::test
