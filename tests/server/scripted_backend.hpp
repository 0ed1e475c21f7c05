// A GenerationBackend that "generates" a fixed script: each piece becomes one token event, then
// kFinished (kStop, or kLength at max_tokens). Lets the handler tests drive exact model outputs
// (DSML tool calls, reasoning) that the tiny random model never produces. Bytes are token ids.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/generation_backend.hpp"

namespace dsv41::server::test {

class ScriptedBackend final : public GenerationBackend {
 public:
  explicit ScriptedBackend(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  ~ScriptedBackend() override { shutdown(); }

  Result<std::vector<int32_t>> tokenize(std::string_view text, bool special) const override;
  Result<std::string> detokenize(std::span<const int32_t> ids) const override;
  Result<RequestId> submit(GenerationRequest request, EventCallback on_event) override;
  Status cancel(RequestId id) override;
  EngineStats stats() const override { return {}; }
  int64_t vocab_size() const override { return 256; }
  int64_t max_context() const override { return 4096; }
  void shutdown() override;

  GenerationRequest last_request() const;

 private:
  std::vector<std::string> pieces_;
  mutable std::mutex mu_;
  std::vector<std::thread> threads_;
  std::atomic<bool> cancelled_{false};
  GenerationRequest last_;
  RequestId next_id_ = 1;
};

// Splits text into pieces of about `n` bytes without cutting a UTF-8 sequence.
std::vector<std::string> split_utf8(const std::string& text, size_t n);

}  // namespace dsv41::server::test
