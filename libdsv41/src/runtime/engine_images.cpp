// Engine requests with images (GenerationRequest.images, docs/vision.md): validation against the
// prompt and the backend, and the per-request layout the prefill chunks read.
#include <fmt/format.h>

#include "runtime/engine_impl.hpp"

namespace dsv41 {

Status Engine::Impl::lay_out_images(const GenerationRequest& request, EngineRequest& r) const {
  if (request.images.empty()) return Status::ok();
  if (Status st = image_support(*model); !st.is_ok())
    return Status(st.code(), "GenerationRequest.images: " + st.message());
  const int64_t n = static_cast<int64_t>(request.prompt.size());
  const int64_t D = model->info.hidden_size;
  const int32_t image_id = model->transformer->config().image_token_id;
  r.image_flags.assign(static_cast<size_t>(n), 0);
  int64_t end = 0;  // end of the previous span
  for (size_t i = 0; i < request.images.size(); ++i) {
    const PromptImage& p = request.images[i];
    const std::string field = fmt::format("GenerationRequest.images[{}]", i);
    if (!p.image) return Status(ErrorCode::kInvalidArgument, field + ".image is null");
    const ImageEmbedding::Impl& e = p.image->impl();
    const int64_t len = e.layout.span_length();
    if (e.dim != D)
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("{}: embedding width {} differs from the model's hidden size {}",
                                field, e.dim, D));
    if (p.offset < end || p.offset > n || len > n - p.offset)  // no p.offset + len: INT64_MAX
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("{}.offset = {}: its {} positions must lie inside the {}-token "
                                "prompt after the previous image (which ends at {})",
                                field, p.offset, len, n, end));
    for (int64_t t = p.offset; t < p.offset + len; ++t)
      if (request.prompt[static_cast<size_t>(t)] != image_id)
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("{}: prompt[{}] = {} inside the image span must be the image "
                                  "token id {}",
                                  field, t, request.prompt[static_cast<size_t>(t)], image_id));
    std::fill_n(r.image_flags.begin() + p.offset, len, 1);
    r.image_rows.insert(r.image_rows.end(), e.values.begin(), e.values.end());
    r.image_keys.push_back(ImageKey{p.offset, len, e.digest});
    end = p.offset + len;
  }
  r.flagged_before.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t t = 0; t < n; ++t)
    r.flagged_before[static_cast<size_t>(t) + 1] =
        r.flagged_before[static_cast<size_t>(t)] + r.image_flags[static_cast<size_t>(t)];
  return Status::ok();
}

}  // namespace dsv41
