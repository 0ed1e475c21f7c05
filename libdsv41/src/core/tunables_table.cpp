// THE table of tunables. Add a row here (and nowhere else) for every new knob; keep names sorted
// within a section. Types are checked when a value is read from the environment or a flag.
#include "core/tunables.hpp"

namespace dsv41 {

namespace {
constexpr TunableSpec kSpecs[] = {
    // --- core ---
    {"DSV41_BACKEND", TunableType::kString, "cpu",
     "where the forward runs: cpu (the reference) or cuda (the current GPU; world 1, release "
     "FP8/FP4 checkpoints); ModelParams.backend overrides"},
    {"DSV41_CUDA_EXL3_GEMM_MIN_ROWS", TunableType::kInt, "97",
     "CUDA backend: DSV41_CUDA_MOE_GEMM_MIN_ROWS for layers that hold EXL3 experts (the Spark "
     "checkpoint's banks), whose grouped GEMV multiplies every row on the CUDA cores: steps of "
     "this many rows take the grouped EXL3 GEMM, shorter ones the GEMV in 16-row tiles (stop "
     "36's rule; the EXL3 crossover is unmeasured on any GPU)"},
    {"DSV41_CUDA_MAX_CHUNK", TunableType::kInt, "2048",
     "CUDA backend: tokens per device step (workspace rows, 1..4096; the released geometry's "
     "workspace is ~3.4 GB at 2048); longer prefills are cut into steps of this many"},
    {"DSV41_CUDA_MAX_CONTEXT", TunableType::kInt, "65536",
     "CUDA backend: longest sequence (sizes the score workspace; caps "
     "ModelInfo.max_position_embeddings)"},
    {"DSV41_CUDA_MOE_GEMM_MIN_ROWS", TunableType::kInt, "1409",
     "CUDA backend: fewest rows of a step (17..4097; 4097 = never) whose routed experts take the "
     "grouped tensor-core GEMM (64-row tiles); shorter steps run the grouped tensor-core GEMVs "
     "in 8-row tiles, which read each chosen expert once per tile but wait less (H100: a 768-token "
     "chunk 668 -> 536 ms, 1024 tokens 758 -> 676; at 2048 the GEMM wins, 1145 against 1254). "
     "GB10's crossover is unmeasured"},
    {"DSV41_CUDA_PDL", TunableType::kBool, "true",
     "CUDA backend: programmatic dependent launch (sm_90+): each kernel of a step starts while "
     "the previous one finishes and streams its weights before waiting for its input; false = "
     "plain stream order (the A/B switch; results are identical)"},
    {"DSV41_CUDA_PREFILL_X", TunableType::kString, "fp32",
     "CUDA backend: how activations enter the tensor-core GEMMs of the large projections in steps "
     "of more than 16 rows (prefill): fp32 (three bf16 parts, rounds like the fp32 reference), "
     "bf16x2 (two parts, 16 bits) or bf16 (one part, as bf16 inference engines do; a third of "
     "the tensor work). Router, indexer, compressor and head inputs stay fp32"},
    {"DSV41_CUDA_SIDE_STREAMS", TunableType::kBool, "true",
     "CUDA backend: independent work of a step runs on second streams: each mHC site's mixes "
     "(projection, Sinkhorn) beside its sublayer, each shared expert beside the router and the "
     "routed experts, each attention's K=V rows and compressor beside its query projections; "
     "false = everything on the step's stream (the A/B switch; results are identical)"},
    {"DSV41_CUDA_VISION", TunableType::kBool, "true",
     "CUDA backend: run the vision tower on the GPU too (~0.9 GB of device memory at the released "
     "dims; a 1024-token image in ~0.6 s on an H100); false keeps the CPU reference tower "
     "(minutes per large image)"},
    {"DSV41_EXL3_PLAN", TunableType::kString, "",
     "Spark checkpoints: EXL3 expert plan (name under <model>/exl3/plan or a path); empty = the "
     "only plan there"},
    {"DSV41_LOG_LEVEL", TunableType::kString, "info", "log threshold: debug|info|warn|error"},
    {"DSV41_THREADS", TunableType::kInt, "0",
     "CPU worker threads of the reference backend; 0 = all hardware threads"},
    // --- server (dsv41-server; each is also a flag: DSV41_MAX_BODY_BYTES <-> --max-body-bytes) ---
    {"DSV41_API_KEY", TunableType::kString, "",
     "bearer key the server requires; empty = use DSV41_API_KEY_FILE"},
    {"DSV41_API_KEY_FILE", TunableType::kString, "dsv41-api-key",
     "file holding the server key; created (0600, 32 random bytes as hex) when absent"},
    {"DSV41_CLAMP_MAX_TOKENS", TunableType::kBool, "true",
     "server: shrink max_tokens to the context room left instead of answering 400"},
    {"DSV41_HOST", TunableType::kString, "0.0.0.0", "server listen address"},
    {"DSV41_IDLE_TIMEOUT_S", TunableType::kInt, "60",
     "server: seconds a keep-alive connection may wait for its next request"},
    {"DSV41_IO_THREADS", TunableType::kInt, "2", "server: HTTP I/O threads"},
    {"DSV41_KV_BYTES", TunableType::kInt, "2700000000",
     "server: engine state budget in bytes (EngineParams.kv_bytes)"},
    {"DSV41_MAX_BATCHED_TOKENS", TunableType::kInt, "2048",
     "server: prompt tokens per engine step (chunked prefill)"},
    {"DSV41_MAX_BODY_BYTES", TunableType::kInt, "67108864",
     "server: largest request body; larger answers 413"},
    {"DSV41_MAX_CONNECTIONS", TunableType::kInt, "256",
     "server: open connections; further ones are closed at accept"},
    {"DSV41_MAX_CONTEXT", TunableType::kInt, "262144",
     "server: prompt + generated tokens per request"},
    {"DSV41_IMAGE_CACHE_BYTES", TunableType::kInt, "268435456",
     "server: encoded images kept for reuse (LRU by pixels; a conversation resends its images "
     "every turn); 0 = off"},
    {"DSV41_MAX_IMAGE_PIXELS", TunableType::kInt, "33554432",
     "server: width x height limit of an input image, checked from its header"},
    {"DSV41_MAX_QUEUE", TunableType::kInt, "256",
     "server: waiting requests before 503 + Retry-After"},
    {"DSV41_MAX_SEQUENCES", TunableType::kInt, "2", "server: sequences decoded per engine step"},
    {"DSV41_METRICS_REQUIRE_KEY", TunableType::kBool, "false",
     "server: /metrics needs the bearer key too (default open, like vLLM)"},
    {"DSV41_MODEL", TunableType::kString, "", "server: model directory to serve (required)"},
    {"DSV41_PORT", TunableType::kInt, "8000", "server listen port (0 = any free port)"},
    {"DSV41_PREFIX_CACHE_ENTRIES", TunableType::kInt, "4",
     "server: finished prefixes kept for reuse (0 = off)"},
    {"DSV41_READ_TIMEOUT_S", TunableType::kInt, "30",
     "server: seconds to receive one whole request once it has started"},
    {"DSV41_REASONING_FIELD", TunableType::kString, "reasoning_content",
     "server: name of the reasoning output field: reasoning_content|reasoning"},
    {"DSV41_SERVED_MODEL_NAME", TunableType::kString, "deepseek-v4.1-flash",
     "server: model id clients must send"},
    {"DSV41_SPECULATIVE_CONFIDENCE", TunableType::kFloat, "0",
     "server: dspark drafts verified only while their survival (confidence head) stays >= this, "
     "0..1 (EngineParams.speculative_confidence; DeepSpec: 0.5)"},
    {"DSV41_SPECULATIVE_METHOD", TunableType::kString, "ngram",
     "server: where speculative drafts come from: ngram (prompt lookup) or dspark (the model's "
     "mtp.* draft module, loaded for it; CPU or CUDA backend, sharded under TP)"},
    {"DSV41_SPECULATIVE_TOKENS", TunableType::kInt, "0",
     "server: drafts verified per decode step (EngineParams.speculative_tokens; 0 = off, 1..15); "
     "same output, fewer forward passes when drafts are accepted"},
    {"DSV41_SSE_KEEPALIVE_MS", TunableType::kInt, "10000",
     "server: ': keep-alive' comment after this long without a stream write"},
    // --- tensor parallelism (dsv41-server flags --rank, --peer, --tp-*; docs/tp.md) ---
    {"DSV41_RANK", TunableType::kInt, "0",
     "server: TP rank of this process: 0 = scheduler + HTTP, 1 = follower without HTTP"},
    {"DSV41_PEER", TunableType::kString, "",
     "server: the other TP rank's fabric address HOST[:PORT] (empty = no tensor parallelism)"},
    {"DSV41_TP_BIND", TunableType::kString, "",
     "server: this rank's fabric IPv4 address that every TP socket binds (never a wildcard)"},
    {"DSV41_TP_PORT", TunableType::kInt, "29500",
     "server: TP port rank 0 listens on (a :PORT in --peer overrides it)"},
    {"DSV41_TP_CONNECT_TIMEOUT_MS", TunableType::kInt, "60000",
     "server: how long a rank waits for the other one at start"},
    {"DSV41_TP_HEARTBEAT_TIMEOUT_MS", TunableType::kInt, "3000",
     "server: TP peer declared lost after this long without any frame (heartbeat every 1/12)"},
    {"DSV41_TP_IB_DEVICE", TunableType::kString, "",
     "TP: RDMA device name (e.g. mlx5_0) for the one-shot all-reduce over libibverbs; empty = "
     "all-reduce over the TCP link. UNVERIFIED ON HARDWARE (docs/tp.md)"},
    {"DSV41_TP_IB_GID_INDEX", TunableType::kInt, "3",
     "TP: GID index of DSV41_TP_IB_DEVICE port 1 (the RoCE v2 IPv4 GID; per NIC, see show_gids)"},
    {"DSV41_TP_NCCL", TunableType::kBool, "false",
     "TP, CUDA backend: the forward's all-reduces and logits gather over NCCL on device buffers "
     "(bootstrapped over the TCP link, which keeps the runtime's messages); both ranks must "
     "agree. NEVER RUN ON TWO GPUS YET (docs/tp.md)"},
};
}  // namespace

std::span<const TunableSpec> tunable_specs() { return kSpecs; }

}  // namespace dsv41
