// The §3 schedule on the GPU, op for op the sequence of Transformer::forward / run_layer / head.
#include "backend/cuda/forward/cuda_transformer.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "backend/cuda/forward/device_attention.hpp"
#include "backend/cuda/forward/device_dspark.hpp"
#include "backend/cuda/forward/device_engram.hpp"
#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/device_moe.hpp"
#include "backend/cuda/forward/device_tp.hpp"
#include "backend/cuda/forward/forward_workspace.hpp"
#include "backend/cuda/forward/launch_check.hpp"
#include "backend/cuda/forward/mhc_sites.hpp"
#include "backend/cuda/forward/step_profile.hpp"
#include "backend/cuda/side_stream.hpp"
#include "core/check.hpp"
#include "dsv41k/dspark.hpp"
#include "dsv41k/engram.hpp"
#include "dsv41k/launchers.hpp"
#include "dsv41k/mhc.hpp"
#include "model/transformer.hpp"

namespace dsv41::cuda {

struct CudaTransformer::Layer {
  DeviceBlockSites sites;
  DeviceAttention attn;
  DeviceMoe ffn;
  std::optional<DeviceEngram> engram;

  uint64_t device_bytes() const {
    return sites.device_bytes() + attn.device_bytes() + ffn.device_bytes() +
           (engram ? engram->device_bytes() : 0);
  }
};

CudaTransformer::~CudaTransformer() = default;

std::unique_ptr<CudaTransformer> CudaTransformer::upload(const Transformer& cpu,
                                                         CudaForwardOptions opts) {
  opts.validate();
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& cfg = cpu.config();
  const TextConfig& t = cfg.text;
  const ShardPlan& plan = cpu.plan();
  DSV41_CHECK(!plan.sharded() || cpu.comm() != nullptr, kInvalidArgument,
              "CUDA forward: the model is a tensor-parallel shard ({}) without a communicator",
              plan.describe());
  DSV41_CHECK(opts.max_context <= t.max_position_embeddings, kInvalidArgument,
              "CudaForwardOptions.max_context = {} exceeds max_position_embeddings {}",
              opts.max_context, t.max_position_embeddings);
  std::unique_ptr<CudaTransformer> m(new CudaTransformer());
  m->cpu_ = &cpu;
  m->opts_ = opts;
  // With side streams the step's stream is the critical path: its blocks go first.
  m->stream_ = std::make_unique<CudaStream>(opts.side_streams);
  const ModelWeights& w = cpu.weights();
  DSV41_CHECK(w.embed.dtype() == DType::kBF16, kUnsupported,
              "embed.weight is {}, the CUDA embedding reads BF16", dtype_name(w.embed.dtype()));
  m->embed_ = DeviceBuffer(w.embed.nbytes());
  m->embed_.upload(w.embed.data, w.embed.nbytes());
  if (opts.gemv_tc) {
    // Where routed descriptors of longer steps may exceed what the decode tensor-core GEMV takes
    // (moe_gemv_tile_rows > fp4_tc_decode_max_rows) and reach fp4_tc_min_rows, also the x split
    // of the routed experts' tensor-core GEMV at the longest step that stays on the GEMVs
    // (moe_gemm_min_rows - 1 rows x k slots x 5120), up to 64 MiB; a step whose split does not
    // fit takes the CUDA-core GEMV.
    const bool moe_split = opts.moe_gemv_tile_rows > opts.fp4_tc_decode_max_rows &&
                           opts.moe_gemv_tile_rows >= opts.fp4_tc_min_rows;
    const int64_t gemv_steps = moe_split
                                   ? std::min<int64_t>(opts.max_chunk, opts.moe_gemm_min_rows - 1)
                                   : kernels::kMoeGemvMaxRows;
    const size_t moe_bytes = std::min<size_t>(
        size_t{64} << 20, kernels::moe_grouped_fp4_gemv_tc_workspace_bytes(
                              gemv_steps * t.num_experts_per_tok,
                              std::max<int64_t>(t.hidden_size, t.moe_intermediate_size)));
    m->gemv_scratch_ =
        DeviceBuffer(std::max(kernels::fp8_gemv_tc_workspace_bytes(kGemvScratchCols), moe_bytes));
  }
  if (opts.side_streams) {
    m->shared_lane_ = std::make_unique<SideStream>();
    m->attn_lane_ = std::make_unique<SideStream>();
    if (opts.gemv_tc) {  // the lanes' x splits, written while the step's stream uses its own
      m->shared_scratch_ = DeviceBuffer(kernels::fp8_gemv_tc_workspace_bytes(
          std::max<int64_t>(t.hidden_size, t.moe_intermediate_size * t.n_shared_experts)));
      m->attn_scratch_ = DeviceBuffer(kernels::fp8_gemv_tc_workspace_bytes(t.head_dim));
    }
  }
  m->norm_ = upload_f32(w.norm);
  m->head_ = std::make_unique<DeviceLinear>(DeviceLinear::upload(w.head, "head.weight"));
  m->head_->set_gemm_min_rows(opts.head_gemm_min_rows);
  if (opts.gemm_split_k) m->gemm_ws_ = DeviceBuffer(kGemmSplitBytes);
  m->head_->set_gemm_workspace(m->gemm_ws_.data(), m->gemm_ws_.bytes());
  const MoeShape moe = moe_shape(t, t.n_routed_experts, t.num_experts_per_tok);
  m->engram_slot_.assign(t.num_hidden_layers, -1);
  for (size_t i = 0; i < t.engram_layer_ids.size(); ++i)
    m->engram_slot_[t.engram_layer_ids[i]] = static_cast<int>(i);
  uint64_t weight_bytes = m->embed_.bytes() + m->norm_.bytes() + m->head_->bytes();
  int64_t local_experts = 0;
  for (int l = 0; l < t.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    auto d = std::make_unique<Layer>();
    d->sites = DeviceBlockSites::upload(lw.attn_norm, lw.ffn_norm, lw.hc_attn, lw.hc_ffn);
    d->attn = DeviceAttention::upload(lw.attn);
    d->ffn = DeviceMoe::upload(lw.ffn, moe, l, cpu.expert_bank());
    if (lw.engram) d->engram = DeviceEngram::upload(*lw.engram, l);
    if (opts.gemv_tc) {
      d->attn.set_gemv_scratch(m->gemv_scratch_.data(), m->gemv_scratch_.bytes());
      d->ffn.set_gemv_scratch(m->gemv_scratch_.data(), m->gemv_scratch_.bytes(),
                              opts.fp4_tc_min_rows, opts.fp4_tc_decode_min_rows,
                              opts.fp4_tc_decode_max_rows);
      if (d->engram) d->engram->set_gemv_scratch(m->gemv_scratch_.data(), m->gemv_scratch_.bytes());
    }
    if (m->shared_lane_) {
      d->ffn.set_shared_lane(m->shared_lane_.get(), m->shared_scratch_.data(),
                             m->shared_scratch_.bytes());
      d->attn.set_side_lane(m->attn_lane_.get(), m->attn_scratch_.data(), m->attn_scratch_.bytes());
    }
    d->attn.set_prefill_x(opts.prefill_x);
    d->ffn.set_prefill_x(opts.prefill_x);
    d->attn.set_gemm(opts.gemm_min_rows, m->gemm_ws_.data(), m->gemm_ws_.bytes());
    d->ffn.set_gemm(opts.gemm_min_rows, opts.moe_gemm_min_rows, opts.moe_exl3_gemm_min_rows,
                    opts.moe_gemv_tile_rows, opts.moe_verify_tile_rows, m->gemm_ws_.data(),
                    m->gemm_ws_.bytes());
    if (d->engram) d->engram->set_gemm(opts.gemm_min_rows, m->gemm_ws_.data(), m->gemm_ws_.bytes());
    if (d->engram) d->engram->set_prefill_x(opts.prefill_x);
    weight_bytes += d->device_bytes();
    if (d->engram) m->report_.engram_table_bytes += d->engram->table_bytes();
    m->report_.routed_bytes += d->ffn.expert_bytes() * d->ffn.resident_experts();
    local_experts += d->ffn.resident_experts();
    m->report_.exl3_experts += d->ffn.exl3_experts();
    m->layers_.push_back(std::move(d));
  }
  if (w.dspark) {
    m->dspark_ = DeviceDspark::upload(cpu, opts.max_chunk, m->gemv_scratch_.data(),
                                      m->gemv_scratch_.bytes());
    weight_bytes += m->dspark_->device_bytes();
  }
  // The mean routed expert over all layers (EXL3 experts differ by K).
  m->report_.expert_bytes =
      m->report_.routed_bytes / std::max<uint64_t>(1, static_cast<uint64_t>(local_experts));
  m->ws_ = std::make_unique<ForwardWorkspace>(cfg, opts.max_chunk, opts.max_context);
  m->mhc_sites_ = std::make_unique<MhcSites>(
      MhcShape{t.hc_mult, t.hidden_size, t.hc_sinkhorn_iters, static_cast<float>(t.hc_eps),
               static_cast<float>(t.rms_norm_eps)},
      opts.side_streams, m->ws_->hc_site_ws.data(), m->ws_->hc_site_ws.bytes());
  const size_t C = static_cast<size_t>(opts.max_chunk);
  if (plan.sharded()) {
    const int64_t Vp = plan.vocab_per_rank;
    parallel::TpComm& comm = opts.data_comm != nullptr ? *opts.data_comm : *cpu.comm();
    DSV41_CHECK(
        comm.rank() == cpu.comm()->rank() && comm.world() == cpu.comm()->world(), kInvalidArgument,
        "CudaForwardOptions.data_comm is rank {} of {}, the Transformer's link rank {} of {}",
        comm.rank(), comm.world(), cpu.comm()->rank(), cpu.comm()->world());
    m->tp_ =
        std::make_unique<DeviceTp>(comm, static_cast<int64_t>(C) * t.hidden_size, kGatherRows * Vp);
    m->head_local_ = DeviceBuffer(kGatherRows * Vp * 4);  // padding columns are never read back
  }
  m->stage_ids_ = std::make_unique<PinnedBuffer>(C * 4);
  m->stage_flags_ = std::make_unique<PinnedBuffer>(C);
  m->stage_hash_ = std::make_unique<PinnedBuffer>(m->ws_->hash_ids.bytes());
  m->stage_logits_ = std::make_unique<PinnedBuffer>(C * t.vocab_size * 4);
  m->stream_->synchronize();
  size_t free_b = 0, total_b = 0;
  DSV41_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  m->report_.weight_bytes = weight_bytes;
  m->report_.workspace_bytes = m->ws_->device_bytes() + m->gemv_scratch_.bytes() +
                               m->gemm_ws_.bytes() + m->shared_scratch_.bytes() +
                               m->head_local_.bytes();
  m->report_.device_used_bytes = total_b - free_b;
  m->report_.host_peak_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  m->report_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

DeviceSequence CudaTransformer::new_sequence(int64_t max_context, int max_rollback) const {
  DSV41_CHECK(max_context >= 0 && max_context <= opts_.max_context, kInvalidArgument,
              "CUDA sequence: max_context = {} is outside [0, {}] (CudaForwardOptions.max_context, "
              "DSV41_CUDA_MAX_CONTEXT)",
              max_context, opts_.max_context);
  return DeviceSequence(cpu_->config(), max_context > 0 ? max_context : opts_.max_context,
                        max_rollback, dspark_ ? dspark_->stages() : 0);
}

DeviceSequence CudaTransformer::clone(const DeviceSequence& seq, int64_t max_context) const {
  DSV41_CHECK(max_context <= opts_.max_context, kInvalidArgument,
              "CUDA sequence clone: max_context = {} exceeds CudaForwardOptions.max_context {}",
              max_context, opts_.max_context);
  return seq.clone(max_context, stream());
}

void CudaTransformer::check_call(const DeviceSequence& seq, std::span<const int32_t> ids,
                                 std::span<const uint8_t> image_flags) const {
  const int64_t T = static_cast<int64_t>(ids.size()), V = cpu_->config().text.vocab_size;
  DSV41_CHECK(!seq.poisoned_, kInternal,
              "CUDA forward: this sequence was left inconsistent by an earlier CUDA error; start "
              "a new one");
  DSV41_CHECK(T > 0, kInvalidArgument, "forward: no tokens");
  DSV41_CHECK(image_flags.empty() || static_cast<int64_t>(image_flags.size()) == T,
              kInvalidArgument, "forward: {} image flags for {} tokens", image_flags.size(), T);
  DSV41_CHECK(seq.pos_ + T <= seq.max_context_, kContextOverflow,
              "forward: positions up to {} exceed the CUDA sequence's max_context {}", seq.pos_ + T,
              seq.max_context_);
  DSV41_CHECK(seq.window.size() == layers_.size(), kInvalidArgument,
              "forward: the sequence has {} layers, the model {}", seq.window.size(),
              layers_.size());
  for (int64_t i = 0; i < T; ++i)
    DSV41_CHECK(ids[i] >= 0 && ids[i] < V, kInvalidArgument,
                "forward: token id {} at position {} (ids[{}]) is outside the vocabulary of {}",
                ids[i], seq.pos_ + i, i, V);
}

std::vector<float> CudaTransformer::forward(DeviceSequence& seq, std::span<const int32_t> ids,
                                            std::span<const uint8_t> image_flags, LogitRows rows,
                                            std::span<const float> image_embeds) const {
  check_call(seq, ids, image_flags);
  const int64_t T = static_cast<int64_t>(ids.size()), V = cpu_->config().text.vocab_size;
  const int64_t D = cpu_->config().text.hidden_size;
  check_image_inputs(image_flags, image_embeds, T, D);
  const bool all = rows == LogitRows::kAll;
  std::vector<float> logits(static_cast<size_t>((all ? T : 1) * V));
  try {
    size_t row0 = 0;  // first image value of the chunk
    for (int64_t c0 = 0; c0 < T; c0 += opts_.max_chunk) {
      const int64_t n = std::min<int64_t>(opts_.max_chunk, T - c0);
      const int64_t head_rows = all ? n : (c0 + n == T ? 1 : 0);
      const std::span<const uint8_t> flags =
          image_flags.empty() ? image_flags : image_flags.subspan(c0, n);
      std::span<const float> embeds;
      if (!image_embeds.empty()) {
        const size_t k = std::count_if(flags.begin(), flags.end(), [](uint8_t f) { return f; });
        embeds = image_embeds.subspan(row0, k * D);
        row0 += k * D;
      }
      run_chunk(seq, ids.subspan(c0, n), flags, head_rows, embeds);
      if (head_rows == 0) {  // the pinned ids / hash staging is reused by the next chunk
        stream_->synchronize();
        continue;
      }
      check_launch(cudaMemcpyAsync(stage_logits_->data(), ws_->logits.data(), head_rows * V * 4,
                                   cudaMemcpyDeviceToHost, stream_->get()),
                   -1, "logits download");
      stream_->synchronize();  // the staging is reused by the next chunk
      std::copy_n(stage_logits_->as<float>(), head_rows * V, logits.data() + (all ? c0 * V : 0));
    }
  } catch (...) {
    seq.poisoned_ = true;
    throw;
  }
  return logits;
}

void CudaTransformer::forward_last(DeviceSequence& seq, std::span<const int32_t> ids) const {
  check_call(seq, ids, {});
  const int64_t T = static_cast<int64_t>(ids.size());
  try {
    for (int64_t c0 = 0; c0 < T; c0 += opts_.max_chunk) {
      const int64_t n = std::min<int64_t>(opts_.max_chunk, T - c0);
      const bool last = c0 + n == T;
      run_chunk(seq, ids.subspan(c0, n), {}, last ? 1 : 0);
      if (!last) stream_->synchronize();  // the pinned ids / hash staging is reused
    }
  } catch (...) {
    seq.poisoned_ = true;
    throw;
  }
}

void CudaTransformer::enqueue(DeviceSequence& seq, std::span<const int32_t> ids,
                              std::span<const uint8_t> image_flags) const {
  check_call(seq, ids, image_flags);
  DSV41_CHECK(static_cast<int64_t>(ids.size()) <= opts_.max_chunk, kInvalidArgument,
              "enqueue: {} tokens exceed CudaForwardOptions.max_chunk = {}", ids.size(),
              opts_.max_chunk);
  try {
    run_chunk(seq, ids, image_flags, static_cast<int64_t>(ids.size()));
  } catch (...) {
    seq.poisoned_ = true;
    throw;
  }
}

const float* CudaTransformer::device_logits() const { return ws_->logits.as<float>(); }

std::vector<std::pair<std::string, double>> CudaTransformer::profile(
    DeviceSequence& seq, std::span<const int32_t> ids) const {
  StepProfile p;
  p.mark("start", stream_->get());
  profile_ = &p;
  try {
    enqueue(seq, ids);
  } catch (...) {
    profile_ = nullptr;
    throw;
  }
  profile_ = nullptr;
  stream_->synchronize();
  return p.totals();
}

namespace {

// "layer 3 attention": the site named in a failed all-reduce.
std::string reduce_site(int layer, const char* site) {
  return "layer " + std::to_string(layer) + " " + site;
}

}  // namespace

// Vocabulary shards (docs/tp.md): this rank's head rows give logits [n, vocab_r] padded to
// vocab_per_rank columns (the padding is sent but never copied out); the all-gather stacks the
// ranks' [n, Vp] blocks in rank order and each block's first vocab_q columns land at columns
// [vocab_q.begin, ...) of ws.logits [rows, V]. Blocks of kGatherRows rows bound the pinned
// staging (a whole 2048-row chunk would need 2 x 2048 x 64,640 floats = 1 GB per buffer).
void CudaTransformer::gather_logits(const float* x, int64_t rows) const {
  const ShardPlan& sp = cpu_->plan();
  const TextConfig& t = cpu_->config().text;
  const int64_t V = t.vocab_size, Vp = sp.vocab_per_rank, Vl = sp.vocab.size(), D = t.hidden_size;
  cudaStream_t s = stream_->get();
  for (int64_t r0 = 0; r0 < rows; r0 += kGatherRows) {
    const int64_t n = std::min(kGatherRows, rows - r0);
    // The local product goes through the block's own rows of ws.logits (n x V >= n x Vl floats,
    // overwritten below) into the padded rows.
    float* out = ws_->logits.as<float>() + r0 * V;
    head_->gemv(x + r0 * D, n, out, s);
    check_launch(cudaMemcpy2DAsync(head_local_.data(), Vp * 4, out, Vl * 4, Vl * 4, n,
                                   cudaMemcpyDeviceToDevice, s),
                 -1, "head logits padding");
    const float* all = tp_->all_gather(head_local_.as<float>(), n * Vp, s, "head");
    for (int q = 0; q < sp.world; ++q) {
      const ShardRange vr = ShardPlan::split(V, q, sp.world);
      check_launch(cudaMemcpy2DAsync(out + vr.begin, V * 4, all + q * n * Vp, Vp * 4, vr.size() * 4,
                                     n, cudaMemcpyHostToDevice, s),
                   -1, "head logits gather");
    }
  }
}

const float* CudaTransformer::upload_image_rows(std::span<const uint8_t> flags,
                                                std::span<const float> image_embeds) const {
  const int64_t D = cpu_->config().text.hidden_size;
  if (image_rows_.bytes() == 0)
    image_rows_ = DeviceBuffer(static_cast<size_t>(opts_.max_chunk * D) * 4);
  // One copy per run of consecutive span positions (an image's rows are one run; chunk edges
  // split it). Pageable source: the copy is staged before the call returns, so image_embeds may
  // go away after the chunk is queued.
  const float* src = image_embeds.data();
  const int64_t T = static_cast<int64_t>(flags.size());
  for (int64_t t = 0; t < T;) {
    if (flags[t] == 0) {
      ++t;
      continue;
    }
    int64_t e = t;
    while (e < T && flags[e] != 0) ++e;
    check_launch(cudaMemcpyAsync(image_rows_.as<float>() + t * D, src, (e - t) * D * 4,
                                 cudaMemcpyHostToDevice, stream_->get()),
                 -1, "image rows upload");
    src += (e - t) * D;
    t = e;
  }
  return image_rows_.as<float>();
}

void CudaTransformer::run_chunk(DeviceSequence& seq, std::span<const int32_t> ids,
                                std::span<const uint8_t> flags, int64_t head_rows,
                                std::span<const float> image_embeds) const {
  const TextConfig& t = cpu_->config().text;
  ForwardWorkspace& ws = *ws_;
  cudaStream_t s = stream_->get();
  const int64_t T = static_cast<int64_t>(ids.size()), pos0 = seq.pos_;
  const int64_t D = t.hidden_size, V = t.vocab_size;
  const int hc = t.hc_mult;
  const float eps = static_cast<float>(t.rms_norm_eps);
  // Host inputs of the chunk: token ids, image flags, Engram hash ids of the new positions.
  seq.tokens.insert(seq.tokens.end(), ids.begin(), ids.end());
  if (flags.empty()) {
    seq.image_flags.resize(seq.tokens.size(), 0);
  } else {
    seq.image_flags.insert(seq.image_flags.end(), flags.begin(), flags.end());
  }
  std::copy(ids.begin(), ids.end(), stage_ids_->as<int32_t>());
  check_launch(cudaMemcpyAsync(ws.ids.data(), stage_ids_->data(), T * 4, cudaMemcpyHostToDevice, s),
               -1, "token ids upload");
  const uint8_t* dflags = nullptr;
  if (!flags.empty()) {
    std::copy(flags.begin(), flags.end(), stage_flags_->as<uint8_t>());
    check_launch(
        cudaMemcpyAsync(ws.flags.data(), stage_flags_->data(), T, cudaMemcpyHostToDevice, s), -1,
        "image flags upload");
    dflags = ws.flags.as<uint8_t>();
  }
  std::vector<int64_t> hash;  // [n_engram, T, cols]
  int64_t cols = 0;
  if (const engram::NgramHasher* hasher = cpu_->hasher()) {
    hash = hasher->ids_for(seq.tokens, seq.image_flags, pos0, pos0 + T);
    cols = hasher->n_cols();
    std::copy(hash.begin(), hash.end(), stage_hash_->as<int64_t>());
    check_launch(cudaMemcpyAsync(ws.hash_ids.data(), stage_hash_->data(), hash.size() * 8,
                                 cudaMemcpyHostToDevice, s),
                 -1, "Engram hash ids upload");
  }
  float* H = ws.H.as<float>();
  float* Hmid = ws.Hmid.as<float>();
  float* x = ws.x.as<float>();
  float* xn = ws.xn.as<float>();
  float* y = ws.y.as<float>();
  if (image_embeds.empty()) {
    check_launch(
        kernels::embed_rows(ws.ids.as<int32_t>(), embed_.as<uint16_t>(), H, T, hc, D, V, s), -1,
        "embed_rows");
  } else {
    const float* rows = upload_image_rows(flags, image_embeds);
    check_launch(kernels::embed_rows_with_images(ws.ids.as<int32_t>(), embed_.as<uint16_t>(),
                                                 dflags, rows, H, T, hc, D, V, s),
                 -1, "embed_rows_with_images");
  }
  const float* pre = ws.pre_init.as<float>();
  float* pre_a = ws.pre_a.as<float>();
  float* post_a = ws.post_a.as<float>();
  float* comb_a = ws.comb_a.as<float>();
  float* pre_f = ws.pre_f.as<float>();
  float* post_f = ws.post_f.as<float>();
  float* comb_f = ws.comb_f.as<float>();
  // Each site's mixes, collapse (with the previous site's pre) and norm (MhcSites: one launch,
  // or two beside the sublayer). The expand before a site is folded into it unless an Engram
  // block sits between them; `pending` is the FFN expand of the previous layer until it has run.
  MhcSites& sites = *mhc_sites_;
  bool pending = false;
  const kernels::HcExpandIn ffn_out{y, Hmid, post_f, comb_f};
  const kernels::HcExpandIn attn_out{y, H, post_a, comb_a};
  // §6.2 DSpark target features of the rows whose context entries can still be read (the last
  // `capacity`): the residual entering each tap layer (after its Engram), mean over the streams.
  const bool tap = dspark_ != nullptr && !seq.dspark.empty();
  const int64_t t0 = tap ? std::max<int64_t>(0, T - seq.dspark[0].capacity) : T;
  float* feat = tap ? dspark_->features(T - t0) : nullptr;
  const std::vector<int> no_taps;
  const std::vector<int>& taps = tap ? dspark_->taps() : no_taps;
  const int64_t n_taps = static_cast<int64_t>(taps.size());
  for (size_t li = 0; li < layers_.size(); ++li) {
    const int l = static_cast<int>(li);
    const Layer& L = *layers_[li];
    if (pending && L.engram) {
      sites.expand(ffn_out, H, T, s, l, "hc_expand ffn (before Engram)");
      pending = false;
    }
    if (L.engram) {  // §3: before the attention site, on all hc streams
      const int slot = engram_slot_[l];
      for (int64_t i = slot * T * cols; i < (slot + 1) * T * cols; ++i)
        DSV41_CHECK(hash[i] >= 0 && hash[i] < L.engram->dims().table_rows, kInternal,
                    "layer {}: Engram row id {} outside the table of {} rows", l, hash[i],
                    L.engram->dims().table_rows);
      L.engram->forward(H, T, ws.hash_ids.as<int64_t>() + slot * T * cols, dflags, eps, ws, s);
      profile_mark(profile_, "engram", s);
    }
    // Attention site: mixes of the entering H; collapse with the previous site's pre.
    sites.site(pending ? &ffn_out : nullptr, H, L.sites.attn_site(), pre, {pre_a, post_a, comb_a},
               xn, T, s, l, "hc_site attn (ffn expand, mixes, collapse, attn_norm)");
    profile_mark(profile_, "mhc+norm", s);
    if (const auto k = std::find(taps.begin(), taps.end(), l) - taps.begin(); k < n_taps)
      check_launch(
          kernels::hc_stream_mean(H + t0 * hc * D, T - t0, hc, D, feat + k * D, n_taps * D, s), l,
          "DSpark target feature");
    L.attn.forward(xn, T, pos0, seq, ws, y, s, profile_);
    if (tp_) tp_->all_reduce_sum(y, T * D, s, reduce_site(l, "attention").c_str());
    profile_mark(profile_, "attn out proj", s);
    // FFN site: the attention expand folded in; collapse with the attention site's pre.
    sites.site(&attn_out, Hmid, L.sites.ffn_site(), pre_a, {pre_f, post_f, comb_f}, xn, T, s, l,
               "hc_site ffn (attn expand, mixes, collapse, ffn_norm)");
    profile_mark(profile_, "mhc+norm", s);
    L.ffn.forward(xn, T, dflags, ws, y, s, profile_);
    if (tp_) tp_->all_reduce_sum(y, T * D, s, reduce_site(l, "ffn").c_str());
    profile_mark(profile_, "moe combine", s);
    pending = true;
    pre = pre_f;
  }
  if (pending) sites.expand(ffn_out, H, T, s, -1, "hc_expand ffn (last layer)");
  sites.join(s);  // pre of the last site (and a captured step's side branch)
  profile_mark(profile_, "mhc+norm", s);
  // Head: logits = head(norm(collapse(H, pre))) of the last head_rows rows.
  if (head_rows > 0) {
    const int64_t r0 = T - head_rows;
    check_launch(kernels::hc_collapse(H + r0 * hc * D, pre + r0 * hc, x, head_rows, hc, D, s), -1,
                 "hc_collapse head");
    check_launch(kernels::rms_norm(x, norm_.as<float>(), x, head_rows, D, eps, s), -1, "norm");
    if (tp_) {
      gather_logits(x, head_rows);
    } else {
      head_->gemv(x, head_rows, ws.logits.as<float>(), s);
    }
  }
  profile_mark(profile_, "head", s);
  if (tap && t0 < T) {
    dspark_->write_context(T - t0, pos0 + t0, seq, ws, s);
    profile_mark(profile_, "dspark context", s);
  }
  seq.advance(T);
}

}  // namespace dsv41::cuda
