// Model: a loaded DeepSeek-V4.1 checkpoint (config, weights, tokenizer), immutable after load and
// shared by any number of Sessions and Engines (they keep it alive). Thread-safe: every const
// member may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv41/export.hpp"
#include "dsv41/image.hpp"
#include "dsv41/status.hpp"

namespace dsv41 {

// Tensor parallelism over two processes (docs/tp.md "Rank processes"): rank 0 listens on
// bind_address:port and accepts only peer_address; rank 1 connects from bind_address. Both load
// their half of the model, and the rendezvous refuses (on both ranks, naming the difference) a
// different config.json, shard plan, tensor inventory or any entry of `settings`.
struct TensorParallelParams {
  int world = 1;  // 1: no tensor parallelism (the other fields are ignored)
  int rank = 0;
  std::string bind_address;  // this rank's fabric IPv4 address; never a wildcard
  std::string peer_address;  // the other rank's
  uint16_t port = 29500;
  int connect_timeout_ms = 60000;
  int op_timeout_ms = 30000;
  int heartbeat_interval_ms = 250;
  int heartbeat_timeout_ms = 3000;
  std::map<std::string, std::string> settings;  // engine settings both ranks must agree on
  // Optional cancel flag for the connect: while a rank waits for (or retries) its peer, setting
  // it ends Model::load within ~100 ms with kAborted "TP connect aborted by the caller" (the
  // server's SIGTERM/SIGINT handler sets it). Not owned; must outlive Model::load.
  const std::atomic<bool>* cancel = nullptr;
};

struct ModelParams {
  std::string model_dir;  // config.json, model.safetensors.index.json + shards, tokenizer.json
  int threads = 0;        // CPU reference worker threads; 0 = DSV41_THREADS, then all cores
  TensorParallelParams tp;
  // Where the forward runs: "cpu" (the reference), "cuda" (the current GPU; release FP8/FP4
  // and EXL3 checkpoints; with tp.world 2 each rank runs its shard, docs/tp.md "CUDA backend"),
  // "" = DSV41_BACKEND. docs/architecture.md "Backends".
  std::string backend;
  // Also load the DSpark draft module `mtp.*` (spec §6) for make_dspark_drafter() /
  // EngineParams.speculative_method = "dspark". CPU backend, world 1.
  bool dspark = false;
  // Names the offending field, e.g. "ModelParams.model_dir is empty".
  Status validate() const;
};

struct ModelInfo {
  std::string model_dir;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_layers = 0;
  int32_t bos_token_id = 0;
  int32_t eos_token_id = 1;
  int32_t image_token_id = -1;  // every image-span position carries it (-1: none configured)
  // The config's value, capped by the backend (CUDA: DSV41_CUDA_MAX_CONTEXT).
  int64_t max_position_embeddings = 0;
  std::string backend;  // "cpu" or "cuda": where this model's forward runs
  // Where Model::encode_image runs the vision tower: "cpu", "cuda", or "" (no usable tower).
  std::string image_encoder;
  // Bytes of per-sequence state in the model's quantised formats (spec §2.8): a fixed part (the
  // window rings) and a part per context token (compressed KV + index keys of the KV sources).
  int64_t state_fixed_bytes = 0;
  double state_bytes_per_token = 0;
};

class DSV41_API Model {
 public:
  // Errors: kInvalidArgument (params), kNotFound / kCorruptFile / kUnsupported naming the file,
  // key or tensor. Nothing is left behind on failure.
  [[nodiscard]] static Result<Model> load(const ModelParams& params);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model();

  const ModelInfo& info() const;
  // parse_special: special-token strings in `text` become their ids (chat prompts); false treats
  // them as plain text (user content).
  [[nodiscard]] Result<std::vector<int32_t>> tokenize(std::string_view text,
                                                      bool parse_special = true) const;
  [[nodiscard]] Result<std::string> detokenize(std::span<const int32_t> ids) const;
  // The raw bytes one token stands for (a byte-level piece may be part of a UTF-8 character;
  // added tokens: their content). kInvalidArgument outside the vocabulary, kUnsupported without
  // tokenizer.json.
  [[nodiscard]] Result<std::string> token_bytes(int32_t id) const;

  // The image's span embeddings from the vision tower (spec §7: sizing, letterbox, ViT,
  // aligner), for Session::append_image. Runs on the CPU worker threads whatever the backend.
  // Errors: kUnsupported when the checkpoint has no vision tower (names the missing part),
  // kInvalidArgument naming the problem with the pixels (size, buffer length, aspect ratio).
  [[nodiscard]] Result<ImageEmbedding> encode_image(const ImagePixels& image) const;
  // Ok when images can be used end to end: the checkpoint has a vision tower and the backend
  // takes image embeddings. Else kUnsupported saying which is missing (cheap: check it before
  // decoding or encoding anything).
  [[nodiscard]] Status image_support() const;
  // Sequence positions an image of width × height pixels takes (spec §7.2 sizing; the span of
  // encode_image without running the tower). kUnsupported without a vision tower,
  // kInvalidArgument for a size the sizing refuses.
  [[nodiscard]] Result<int64_t> image_positions(int width, int height) const;

  // Tensor parallelism. tp_health: Ok unless the link to the other rank failed (rank died,
  // link stalled past the heartbeat timeout, abort): then that error, at once. Rank 0's
  // Sessions and Engines drive the follower; a failed link fails their calls with that error.
  [[nodiscard]] Status tp_health() const;
  // tp_health() as a callable that keeps the loaded model alive (for a watcher thread after the
  // Model was moved into an engine).
  [[nodiscard]] std::function<Status()> tp_health_probe() const;
  // Rank >= 1: serves rank 0 until it stops (Ok), *stop is set (kCancelled) or the link fails
  // (its error). kInvalidArgument on rank 0 or without tensor parallelism.
  [[nodiscard]] Status run_tp_follower(const std::atomic<bool>* stop = nullptr) const;

  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }

 private:
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace dsv41
