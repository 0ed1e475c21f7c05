// Model::Impl and Session::Impl: the runtime's view of a loaded model (CPU reference transformer,
// the forward backend that runs it, tokenizer) and of one sequence. Shared by session.cpp and
// engine.cpp.
#pragma once

#include <memory>

#include "dsv41/export.hpp"
#include "dsv41/model.hpp"
#include "dsv41/session.hpp"
#include "model/transformer.hpp"
#include "parallel/tp_comm.hpp"
#include "runtime/forward_backend.hpp"
#include "runtime/image_encoder.hpp"
#include "tokenizer/tokenizer.hpp"
#include "vision/vision_tower.hpp"

namespace dsv41 {

struct DSV41_INTERNAL Model::Impl {
  std::unique_ptr<parallel::TpComm> comm;  // world 2 only; outlives the transformer
  // DSV41_TP_NCCL on the CUDA backend: the forward's data collectives (borrows comm; outlives
  // the backend, destroyed before comm).
  std::unique_ptr<parallel::TpComm> data_comm;
  std::unique_ptr<Transformer> transformer;  // weights + config; the CPU backend runs it
  std::unique_ptr<ForwardBackend> backend;   // after transformer: destroyed first
  std::unique_ptr<Tokenizer> tokenizer;      // null when the model directory has no tokenizer.json
  // Bound at load when config.json has a vision_config and the checkpoint its tensors; else
  // null and vision_error says why (Model::encode_image returns it).
  std::unique_ptr<vision::VisionTower> vision;
  Status vision_error;
  // The tower on the backend's device (CUDA), after vision (it reads vision's configuration and
  // rows, so it goes first); null: encode_image runs the CPU reference tower.
  std::unique_ptr<ImageEncoder> device_vision;
  ModelInfo info;
};

struct DSV41_INTERNAL ImageEmbedding::Impl {
  vision::ImageLayout layout;
  int64_t dim = 0;
  uint64_t digest = 0;        // of the pixels (size + bytes): the prefix cache's image key
  std::vector<float> values;  // [layout.span_length(), dim]
};

struct DSV41_INTERNAL Session::Impl {
  std::shared_ptr<const Model::Impl> model;
  SessionParams params;
  SequenceHandle state;
};

// Model::image_support: Ok, or kUnsupported naming what is missing (tower, backend, TP).
Status image_support(const Model::Impl& m);

// Bytes of one sequence's state at `tokens` context tokens, in the model's quantised formats.
int64_t state_bytes(const ModelInfo& info, int64_t tokens);

// The shared append path of Session and Engine: validates ids and the context limit, then runs
// forward in chunks of params.chunk_tokens. Throws detail::Failure (nothing committed on error).
// image_flags [n] and image_rows [n_flagged, hidden] (optional): image-span positions and their
// input embeddings (ForwardBackend::forward_image), split with the chunks.
std::vector<float> session_append(Session::Impl& s, std::span<const int32_t> ids, bool all_logits,
                                  std::span<const uint8_t> image_flags = {},
                                  std::span<const float> image_rows = {});
// The same append with the last row sampled on the backend's device (backend->
// samples_on_device() only); the outcome goes to DeviceSampling::finish.
// Appends an image span (Session::append_image). Throws detail::Failure.
std::vector<float> session_append_image(Session::Impl& s, const ImageEmbedding& image,
                                        bool all_logits);
sampling::DeviceSampleOutcome session_append_sample(Session::Impl& s, std::span<const int32_t> ids,
                                                    const sampling::SamplePlan& plan);

}  // namespace dsv41
