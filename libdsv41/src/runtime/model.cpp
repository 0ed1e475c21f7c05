// Model: load (config + checkpoint + tokenizer) behind the public pImpl; no exception escapes.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/check.hpp"
#include "core/log.hpp"
#include "core/tunables.hpp"
#include "runtime/mirrored_backend.hpp"
#include "runtime/model_impl.hpp"
#include "runtime/tp_follower.hpp"
#include "runtime/tp_link.hpp"
#include "runtime/tp_nccl_link.hpp"

namespace dsv41 {

Status ModelParams::validate() const {
  if (model_dir.empty())
    return Status(ErrorCode::kInvalidArgument, "ModelParams.model_dir is empty");
  if (tp.world < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "ModelParams.tp.world = " + std::to_string(tp.world) + " must be 1 or 2");
  if (tp.world > 1) {
    if (Status s = tp_params(tp).validate(); !s.is_ok())
      return Status(s.code(), "ModelParams.tp: " + s.message());
  }
  if (threads < 0)
    return Status(ErrorCode::kInvalidArgument,
                  "ModelParams.threads = " + std::to_string(threads) + " must be >= 0");
  if (!backend.empty() && backend != "cpu" && backend != "cuda")
    return Status(ErrorCode::kInvalidArgument,
                  "ModelParams.backend = \"" + backend + "\" must be \"cpu\", \"cuda\" or empty");
  return Status::ok();
}

namespace {
ModelInfo describe(const Transformer& t, const ForwardBackend& b, const std::string& dir) {
  const ModelConfig& c = t.config();
  const TextConfig& x = c.text;
  ModelInfo info;
  info.model_dir = dir;
  info.vocab_size = x.vocab_size;
  info.hidden_size = x.hidden_size;
  info.num_layers = x.num_hidden_layers;
  info.bos_token_id = c.bos_token_id;
  info.eos_token_id = c.eos_token_id;
  info.image_token_id = c.image_token_id;
  info.max_position_embeddings = std::min(x.max_position_embeddings, b.max_context());
  info.backend = b.name();
  // §2.7/§2.8: window FP8 entry = head_dim + head_dim/32 scale bytes (528 B released);
  // compressed FP4 entry = head_dim/2 + head_dim/16 e4m3 scales (288 B); index key FP4 =
  // index_head_dim/2 + index_head_dim/32 (68 B).
  info.state_fixed_bytes =
      int64_t{x.num_hidden_layers} * x.sliding_window * (x.head_dim + x.head_dim / 32);
  const double entry =
      x.head_dim / 2 + x.head_dim / 16 + x.index_head_dim / 2 + x.index_head_dim / 32;
  for (const LayerRole& r : c.roles)
    if (r.kv_source) info.state_bytes_per_token += entry / r.ratio;
  return info;
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
}  // namespace

int64_t state_bytes(const ModelInfo& info, int64_t tokens) {
  return info.state_fixed_bytes +
         static_cast<int64_t>(std::ceil(info.state_bytes_per_token * static_cast<double>(tokens)));
}

namespace {

// §7: the tower when the config declares one and the checkpoint has it. A checkpoint without it
// (the text-only tiny models declare the released vision_config) still loads; images then fail
// with the reason.
void bind_vision(Model::Impl& m) {
  const Transformer& t = *m.transformer;
  if (!t.config().has_vision) {
    m.vision_error =
        Status(ErrorCode::kUnsupported, m.info.model_dir +
                                            ": config.json has no vision_config (text-only "
                                            "model): images are not supported");
    return;
  }
  Status st = detail::capture_status([&] {
    m.vision = std::make_unique<vision::VisionTower>(t.checkpoint(), t.config(), t.pool());
  });
  if (!st.is_ok()) {
    m.vision_error = Status(ErrorCode::kUnsupported,
                            m.info.model_dir + ": the checkpoint has no usable vision tower (" +
                                st.message() + "): images are not supported");
    return;
  }
  m.info.image_encoder = "cpu";
  // On the CUDA backend the tower runs on the GPU too (the CPU reference takes minutes for a
  // large image, docs/vision.md "Cost") unless DSV41_CUDA_VISION is off; a tensor-parallel
  // follower never encodes. A tower that cannot go up (memory, an unsupported head_dim) leaves
  // the CPU tower in charge, with a warning naming why.
  const Tunables tun = Tunables::from_environment();
  if (std::string(m.backend->name()) != "cuda" || (m.comm && m.comm->rank() != 0) ||
      !tun.get_bool("DSV41_CUDA_VISION"))
    return;
  Status dev =
      detail::capture_status([&] { m.device_vision = make_cuda_image_encoder(*m.vision); });
  if (dev.is_ok()) {
    m.info.image_encoder = "cuda";
  } else {
    Logger(parse_log_level(tun.get_string("DSV41_LOG_LEVEL")))
        .log(LogLevel::kWarn, "vision tower stays on the CPU: {}", dev.to_string());
  }
}

}  // namespace

Result<Model> Model::load(const ModelParams& params) {
  Status st = params.validate();
  if (!st.is_ok()) return st;
  std::shared_ptr<Impl> impl;
  st = detail::capture_status([&] {
    impl = std::make_shared<Impl>();
    const Tunables tun = Tunables::from_environment();
    int threads = params.threads;
    if (threads == 0) threads = static_cast<int>(tun.get_int("DSV41_THREADS"));
    std::string backend = params.backend.empty() ? tun.get_string("DSV41_BACKEND") : params.backend;
    DSV41_CHECK(backend == "cpu" || backend == "cuda", kInvalidArgument,
                "DSV41_BACKEND = \"{}\" must be \"cpu\" or \"cuda\"", backend);
    if (params.tp.world > 1) {
      // The backend and, on CUDA, its chunk decide a forward's collectives (how many calls,
      // how many logit rows): both ranks must agree, or the rendezvous names the difference.
      TensorParallelParams tp = params.tp;
      tp.settings["backend"] = backend;
      // Both ranks bind mtp.* and run each draft round's collectives, or neither.
      tp.settings["dspark"] = params.dspark ? "1" : "0";
      if (backend == "cuda")
        tp.settings["cuda_max_chunk"] = std::to_string(tun.get_int("DSV41_CUDA_MAX_CHUNK"));
      // Both ranks create the NCCL communicator or neither (one alone would wait for the other
      // until the init timeout).
      const bool nccl = tun.get_bool("DSV41_TP_NCCL");
      DSV41_CHECK(!nccl || backend == "cuda", kInvalidArgument,
                  "DSV41_TP_NCCL = true needs DSV41_BACKEND = \"cuda\" (got \"{}\"): NCCL carries "
                  "the CUDA forward's device buffers",
                  backend);
      tp.settings["tp_nccl"] = nccl ? "1" : "0";
      // Both ranks set up the one-shot RDMA all-reduce or neither (a flag, not the device name,
      // which differs per host): one alone waited for the other's setup until the op timeout
      // with a message that did not mention RDMA.
      const std::string ib_device = tun.get_string("DSV41_TP_IB_DEVICE");
      tp.settings["tp_rdma"] = ib_device.empty() ? "0" : "1";
      impl->comm = connect_tp_link(params.model_dir, tp, ib_device,
                                   static_cast<int>(tun.get_int("DSV41_TP_IB_GID_INDEX")));
      if (nccl)
        impl->data_comm =
            connect_tp_nccl(*impl->comm, std::chrono::milliseconds(tp.connect_timeout_ms));
    }
    impl->transformer =
        Transformer::load(params.model_dir, static_cast<size_t>(threads), impl->comm.get(),
                          tun.get_string("DSV41_EXL3_PLAN"), params.dspark);
    if (backend == "cuda") {
      const int64_t chunk = tun.get_int("DSV41_CUDA_MAX_CHUNK");
      const int64_t context = tun.get_int("DSV41_CUDA_MAX_CONTEXT");
      DSV41_CHECK(chunk >= 1 && chunk <= 4096, kInvalidArgument,
                  "DSV41_CUDA_MAX_CHUNK = {} is outside [1, 4096]", chunk);
      DSV41_CHECK(context >= 1, kInvalidArgument, "DSV41_CUDA_MAX_CONTEXT = {} must be >= 1",
                  context);
      const std::string prefill_x = tun.get_string("DSV41_CUDA_PREFILL_X");
      CudaBackendOptions o;
      o.prefill_x_parts = prefill_x == "fp32"     ? 3
                          : prefill_x == "bf16x2" ? 2
                          : prefill_x == "bf16"   ? 1
                                                  : 0;
      DSV41_CHECK(o.prefill_x_parts != 0, kInvalidArgument,
                  "DSV41_CUDA_PREFILL_X = \"{}\" must be \"fp32\", \"bf16x2\" or \"bf16\"",
                  prefill_x);
      o.programmatic_launch = tun.get_bool("DSV41_CUDA_PDL");
      o.side_streams = tun.get_bool("DSV41_CUDA_SIDE_STREAMS");
      const int64_t moe_gemm = tun.get_int("DSV41_CUDA_MOE_GEMM_MIN_ROWS");
      DSV41_CHECK(moe_gemm >= 17 && moe_gemm <= 4097, kInvalidArgument,
                  "DSV41_CUDA_MOE_GEMM_MIN_ROWS = {} is outside [17, 4097]", moe_gemm);
      o.moe_gemm_min_rows = static_cast<int>(moe_gemm);
      const int64_t exl3_gemm = tun.get_int("DSV41_CUDA_EXL3_GEMM_MIN_ROWS");
      DSV41_CHECK(exl3_gemm >= 17 && exl3_gemm <= 4097, kInvalidArgument,
                  "DSV41_CUDA_EXL3_GEMM_MIN_ROWS = {} is outside [17, 4097]", exl3_gemm);
      o.moe_exl3_gemm_min_rows = static_cast<int>(exl3_gemm);
      o.max_chunk = static_cast<int>(chunk);
      o.max_context = context;
      o.data_comm = impl->data_comm.get();
      impl->backend = make_cuda_backend(*impl->transformer, o);
    } else {
      impl->backend = make_cpu_backend(*impl->transformer);
    }
    // Rank 0 tells the follower every sequence operation (runtime/mirrored_backend.hpp); the
    // follower runs them on its own backend in run_tp_follower.
    if (impl->comm && impl->comm->rank() == 0)
      impl->backend = make_mirrored_backend(std::move(impl->backend), *impl->comm,
                                            impl->transformer->config().text.vocab_size,
                                            impl->transformer->config().text.hidden_size);
    const std::string tok = params.model_dir + "/tokenizer.json";
    if (file_exists(tok)) impl->tokenizer = Tokenizer::load(tok);
    impl->info = describe(*impl->transformer, *impl->backend, params.model_dir);
    bind_vision(*impl);
  });
  if (!st.is_ok()) return st;
  return Model(std::move(impl));
}

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const ModelInfo& Model::info() const { return impl_->info; }

Status Model::tp_health() const { return impl_->comm ? impl_->comm->health() : Status::ok(); }

std::function<Status()> Model::tp_health_probe() const {
  return [impl = impl_] { return impl->comm ? impl->comm->health() : Status::ok(); };
}

Status Model::run_tp_follower(const std::atomic<bool>* stop) const {
  if (!impl_->comm || impl_->comm->rank() == 0)
    return Status(ErrorCode::kInvalidArgument,
                  "run_tp_follower: this model is not a follower rank (TensorParallelParams.rank "
                  "must be >= 1 with world 2)");
  return run_follower(*impl_->backend, *impl_->comm, impl_->transformer->config().text.hidden_size,
                      stop);
}

Result<std::vector<int32_t>> Model::tokenize(std::string_view text, bool parse_special) const {
  if (!impl_->tokenizer)
    return Status(ErrorCode::kUnsupported, impl_->info.model_dir + ": no tokenizer.json");
  std::vector<int32_t> ids;
  Status st = detail::capture_status([&] { ids = impl_->tokenizer->encode(text, parse_special); });
  if (!st.is_ok()) return st;
  return ids;
}

Result<std::string> Model::detokenize(std::span<const int32_t> ids) const {
  if (!impl_->tokenizer)
    return Status(ErrorCode::kUnsupported, impl_->info.model_dir + ": no tokenizer.json");
  std::string text;
  Status st = detail::capture_status([&] { text = impl_->tokenizer->decode(ids); });
  if (!st.is_ok()) return st;
  return text;
}

Result<std::string> Model::token_bytes(int32_t id) const {
  if (!impl_->tokenizer)
    return Status(ErrorCode::kUnsupported, impl_->info.model_dir + ": no tokenizer.json");
  if (id < 0 || static_cast<size_t>(id) >= impl_->tokenizer->vocab_size())
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("token_bytes: id {} is outside the tokenizer's vocabulary [0, {})",
                              id, impl_->tokenizer->vocab_size()));
  std::string bytes;
  Status st = detail::capture_status([&] { bytes = impl_->tokenizer->token_bytes(id); });
  if (!st.is_ok()) return st;
  return bytes;
}

ImageEmbedding::ImageEmbedding(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageEmbedding::ImageEmbedding(ImageEmbedding&&) noexcept = default;
ImageEmbedding& ImageEmbedding::operator=(ImageEmbedding&&) noexcept = default;
ImageEmbedding::~ImageEmbedding() = default;
int64_t ImageEmbedding::positions() const { return impl_->layout.span_length(); }
int ImageEmbedding::rows() const { return impl_->layout.llm_h; }
int ImageEmbedding::cols() const { return impl_->layout.llm_w; }
int64_t ImageEmbedding::embedding_dim() const { return impl_->dim; }
std::span<const float> ImageEmbedding::values() const { return impl_->values; }

Status image_support(const Model::Impl& m) {
  if (!m.vision) return m.vision_error;
  if (!m.backend->takes_image_embeddings())
    return Status(ErrorCode::kUnsupported,
                  fmt::format("the {} backend does not take image embeddings yet (images run on "
                              "the CPU backend)",
                              m.backend->name()));
  return Status::ok();
}

Status Model::image_support() const { return dsv41::image_support(*impl_); }

Result<int64_t> Model::image_positions(int width, int height) const {
  if (!impl_->vision) return impl_->vision_error;
  Result<vision::ImageLayout> l = vision::image_layout(width, height, impl_->vision->config());
  if (!l.is_ok()) return l.status();
  return l->span_length();
}

Result<ImageEmbedding> Model::encode_image(const ImagePixels& image) const {
  if (!impl_->vision) return impl_->vision_error;
  // The pixel copy and the patches allocate as much as the image: under the guard, so a
  // bad_alloc is kOutOfMemory, not an exception through the API.
  std::optional<Result<vision::ImagePatches>> made;
  std::unique_ptr<ImageEmbedding::Impl> e;
  Status alloc = detail::capture_status([&] {
    vision::RgbImage rgb{image.width, image.height,
                         std::vector<uint8_t>(image.rgb.begin(), image.rgb.end())};
    made.emplace(vision::make_patches(rgb, impl_->vision->config()));
    e = std::make_unique<ImageEmbedding::Impl>();
  });
  if (!alloc.is_ok()) return alloc;
  Result<vision::ImagePatches>& patches = *made;
  if (!patches.is_ok()) return patches.status();
  e->layout = patches->layout;
  e->dim = impl_->vision->embedding_dim();
  // FNV-1a 64 over the size and the pixels: equal pixels give equal embeddings.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint8_t b) { h = (h ^ b) * 1099511628211ull; };
  for (int v : {image.width, image.height})
    for (int i = 0; i < 4; ++i) mix(static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * i)));
  for (uint8_t b : image.rgb) mix(b);
  e->digest = h;
  Status st = detail::capture_status([&] {
    e->values =
        impl_->device_vision ? impl_->device_vision->span(*patches) : impl_->vision->span(*patches);
  });
  if (!st.is_ok()) return st;
  return ImageEmbedding(std::move(e));
}

}  // namespace dsv41
