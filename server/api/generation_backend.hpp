// What the handlers need from an inference engine, behind one interface so the tool-call and
// framing paths can be tested with a scripted token source (ScriptedBackend) while the server
// runs the real dsv41::Engine (EngineBackend). Same threading contract as dsv41::Engine: callbacks
// run on the backend's thread, one at a time, and must not block.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"

namespace dsv41::sampling {
struct TokenVocabulary;
}

namespace dsv41::server {

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;
  // The vocabulary table of the output constraints (api/token_vocabulary.hpp), built on first
  // use and kept with the backend whose tokenizer it reflects.
  struct VocabularyCache {
    std::mutex mu;
    std::shared_ptr<const sampling::TokenVocabulary> table;
  };
  VocabularyCache& vocabulary_cache() const { return vocabulary_cache_; }

  virtual Result<std::vector<int32_t>> tokenize(std::string_view text, bool special) const = 0;
  virtual Result<std::string> detokenize(std::span<const int32_t> ids) const = 0;
  // A token's raw bytes (logprobs `bytes`). Default: its one-token decode.
  virtual Result<std::string> token_bytes(int32_t id) const {
    const int32_t one[1] = {id};
    return detokenize(one);
  }
  virtual Result<RequestId> submit(GenerationRequest request, EventCallback on_event) = 0;
  virtual Status cancel(RequestId id) = 0;
  virtual EngineStats stats() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_context() const = 0;
  // Images (docs/vision.md): whether they can be used (the reason when not), the token id every
  // span position carries, and the encoder. Default: no images.
  virtual Status image_support() const {
    return Status(ErrorCode::kUnsupported, "this backend has no vision tower");
  }
  virtual int32_t image_token_id() const { return -1; }
  virtual Result<int64_t> image_positions(int width, int height) const {
    (void)width;
    (void)height;
    return image_support();
  }
  virtual Result<ImageEmbedding> encode_image(const ImagePixels& image) const {
    (void)image;
    return image_support();
  }
  // Cancels everything; every accepted request still gets its kFinished event.
  virtual void shutdown() = 0;

 private:
  mutable VocabularyCache vocabulary_cache_;
};

// The real engine over a loaded model.
class EngineBackend final : public GenerationBackend {
 public:
  static Result<std::unique_ptr<EngineBackend>> create(Model model, const EngineParams& params);

  Result<std::vector<int32_t>> tokenize(std::string_view text, bool special) const override;
  Result<std::string> detokenize(std::span<const int32_t> ids) const override;
  Result<std::string> token_bytes(int32_t id) const override { return model_.token_bytes(id); }
  Result<RequestId> submit(GenerationRequest request, EventCallback on_event) override;
  Status cancel(RequestId id) override;
  EngineStats stats() const override;
  int64_t vocab_size() const override;
  int64_t max_context() const override { return max_context_; }
  Status image_support() const override { return model_.image_support(); }
  int32_t image_token_id() const override { return model_.info().image_token_id; }
  Result<int64_t> image_positions(int width, int height) const override {
    return model_.image_positions(width, height);
  }
  Result<ImageEmbedding> encode_image(const ImagePixels& image) const override {
    return model_.encode_image(image);
  }
  void shutdown() override;

 private:
  EngineBackend(Model model, Engine engine, int64_t max_context);
  Model model_;
  Engine engine_;
  int64_t max_context_;
};

}  // namespace dsv41::server
