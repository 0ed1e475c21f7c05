// Backend selection (ModelParams.backend / DSV41_BACKEND, runtime/forward_backend.hpp) on tiny8:
// bad names are typed errors naming the field; "cpu" is the reference; "cuda" either runs and
// agrees with the reference within the CUDA-vs-CPU bound of tests/kernel/test_model_forward.cpp
// (2e-3 on tiny8), or fails with a status that says CUDA is the problem (no GPU, built without
// CUDA) — never a crash. Linked into the golden binary (CI: no GPU) and the kernel one (H200).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>

#include "dsv41/session.hpp"
#include "loader/safetensors.hpp"
#include "support/fixtures.hpp"
#include "support/tolerance.hpp"

using namespace dsv41;
using dsv41::test::fixture;

namespace {

Result<Model> load_tiny8(const std::string& backend) {
  ModelParams p;
  p.model_dir = fixture("golden/tiny8");
  p.backend = backend;
  return Model::load(p);
}

std::vector<float> all_logits(const Model& m, std::span<const int32_t> ids) {
  auto s = Session::create(m, SessionParams{});
  REQUIRE(s.is_ok());
  auto r = s->append(ids, true);
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

std::vector<int32_t> prompt1() {
  auto f = SafetensorsFile::open(fixture("golden/tiny8/golden.safetensors"));
  std::vector<float> v = tensor_to_f32(f->view(*f->find_info("prompt1.input_ids")));
  return std::vector<int32_t>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("model: a backend other than cpu or cuda is rejected naming the field",
          "[golden][runtime][backend]") {
  auto r = load_tiny8("tpu");
  REQUIRE(r.status().code() == ErrorCode::kInvalidArgument);
  REQUIRE_THAT(r.status().message(), Catch::Contains("ModelParams.backend = \"tpu\""));
}

TEST_CASE("model: backend cpu is the reference and says so", "[golden][runtime][backend]") {
  auto r = load_tiny8("cpu");
  REQUIRE(r.is_ok());
  REQUIRE(r->info().backend == "cpu");
  REQUIRE(r->info().max_position_embeddings == 1048576);  // tiny8 config.json, uncapped
}

TEST_CASE("model: backend cuda matches the reference or fails naming CUDA",
          "[golden][runtime][backend]") {
  auto gpu = load_tiny8("cuda");
  if (!gpu.is_ok()) {
    std::string m = gpu.status().message();
    std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
    INFO("status: " << gpu.status().to_string());
    REQUIRE(m.find("cuda") != std::string::npos);
    REQUIRE(gpu.status().code() != ErrorCode::kInvalidArgument);  // the request itself was fine
    WARN("backend cuda unavailable here (" << gpu.status().to_string() << ")");
    return;
  }
  REQUIRE(gpu->info().backend == "cuda");
  REQUIRE(gpu->info().max_position_embeddings == 65536);  // DSV41_CUDA_MAX_CONTEXT default
  auto cpu = load_tiny8("cpu");
  REQUIRE(cpu.is_ok());
  const std::vector<int32_t> ids = prompt1();
  const std::vector<float> want = all_logits(*cpu, ids);
  const std::vector<float> got = all_logits(*gpu, ids);
  REQUIRE(got.size() == want.size());
  dsv41::test::require_close("tiny8 prompt1 cuda vs cpu", got, want, want.size(), 2e-3);
}

TEST_CASE("model: CUDA tunables out of range are rejected naming the variable",
          "[golden][runtime][backend]") {
  // Checked before any device work, so the same answer with or without a GPU.
  const struct {
    const char* name;
    const char* value;
    const char* message;
  } cases[] = {
      {"DSV41_CUDA_MAX_CHUNK", "5000000000",  // would wrap to a valid int if truncated
       "DSV41_CUDA_MAX_CHUNK = 5000000000 is outside [1, 4096]"},
      {"DSV41_CUDA_MAX_CONTEXT", "0", "DSV41_CUDA_MAX_CONTEXT = 0 must be >= 1"},
      {"DSV41_CUDA_PREFILL_X", "fp16",
       "DSV41_CUDA_PREFILL_X = \"fp16\" must be \"fp32\", \"bf16x2\" or \"bf16\""},
      {"DSV41_CUDA_MOE_GEMM_MIN_ROWS", "16",
       "DSV41_CUDA_MOE_GEMM_MIN_ROWS = 16 is outside [17, 4097]"},
      {"DSV41_CUDA_EXL3_GEMM_MIN_ROWS", "4098",
       "DSV41_CUDA_EXL3_GEMM_MIN_ROWS = 4098 is outside [17, 4097]"},
  };
  for (const auto& c : cases) {
    ::setenv(c.name, c.value, 1);
    auto r = load_tiny8("cuda");
    ::unsetenv(c.name);
    INFO(c.name << " = " << c.value);
    REQUIRE(r.status().code() == ErrorCode::kInvalidArgument);
    REQUIRE_THAT(r.status().message(), Catch::Contains(c.message));
  }
}

TEST_CASE("model: DSV41_TP_NCCL with the CPU backend is refused naming both settings",
          "[golden][runtime][backend]") {
  // Checked before the TP link is opened: nothing listens at the peer address.
  ModelParams p;
  p.model_dir = fixture("golden/tiny8");
  p.backend = "cpu";
  p.tp.world = 2;
  p.tp.rank = 0;
  p.tp.bind_address = "127.0.0.1";
  p.tp.peer_address = "127.0.0.2";
  p.tp.connect_timeout_ms = 100;
  ::setenv("DSV41_TP_NCCL", "1", 1);
  auto r = Model::load(p);
  ::unsetenv("DSV41_TP_NCCL");
  REQUIRE(r.status().code() == ErrorCode::kInvalidArgument);
  REQUIRE_THAT(
      r.status().message(),
      Catch::Contains("DSV41_TP_NCCL = true needs DSV41_BACKEND = \"cuda\" (got \"cpu\")"));
}
