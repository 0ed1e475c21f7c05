// Model: a loaded DeepSeek-V4.1 checkpoint (config, weights, tokenizer), immutable after load and
// shared by any number of Sessions and Engines (they keep it alive). Thread-safe: every const
// member may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv41/export.hpp"
#include "dsv41/status.hpp"

namespace dsv41 {

struct ModelParams {
  std::string model_dir;  // config.json, model.safetensors.index.json + shards, tokenizer.json
  int threads = 0;        // CPU reference worker threads; 0 = DSV41_THREADS, then all cores
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
  int64_t max_position_embeddings = 0;
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

  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }

 private:
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace dsv41
