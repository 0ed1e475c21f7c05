// C ABI shims of the image calls (dsv41.h "images"): Model::encode_image, ImageEmbedding,
// Session::append_image.
#include "capi/c_api_support.hpp"

using namespace dsv41::capi;

extern "C" {

dsv41_status dsv41_model_encode_image(const dsv41_model* model, const uint8_t* rgb, size_t rgb_len,
                                      int32_t width, int32_t height, dsv41_image** out) {
  if (out == nullptr) return invalid("dsv41_model_encode_image: out is NULL");
  *out = nullptr;
  if (model == nullptr) return invalid("dsv41_model_encode_image: model is NULL");
  if (rgb == nullptr && rgb_len > 0)
    return invalid("dsv41_model_encode_image: rgb is NULL with rgb_len > 0");
  return guarded([&] {
    auto r = model->model.encode_image({width, height, std::span<const uint8_t>(rgb, rgb_len)});
    if (!r.is_ok()) return fail(r.status());
    *out = new dsv41_image{std::make_shared<const dsv41::ImageEmbedding>(std::move(r).value())};
    return DSV41_OK;
  });
}

dsv41_status dsv41_model_encode_image_file(const dsv41_model* model, const uint8_t* bytes,
                                           size_t len, int64_t max_pixels, dsv41_image** out) {
  if (out == nullptr) return invalid("dsv41_model_encode_image_file: out is NULL");
  *out = nullptr;
  if (model == nullptr) return invalid("dsv41_model_encode_image_file: model is NULL");
  if (bytes == nullptr && len > 0)
    return invalid("dsv41_model_encode_image_file: bytes is NULL with len > 0");
  if (max_pixels < 0) return invalid("dsv41_model_encode_image_file: max_pixels is negative");
  return guarded([&] {
    auto decoded = dsv41::decode_image(std::span<const uint8_t>(bytes, len),
                                       max_pixels == 0 ? int64_t{1} << 25 : max_pixels);
    if (!decoded.is_ok()) return fail(decoded.status());
    auto r = model->model.encode_image(decoded->pixels());
    if (!r.is_ok()) return fail(r.status());
    *out = new dsv41_image{std::make_shared<const dsv41::ImageEmbedding>(std::move(r).value())};
    return DSV41_OK;
  });
}

void dsv41_image_free(dsv41_image* image) { delete image; }

int64_t dsv41_image_positions(const dsv41_image* image) {
  return image ? image->image->positions() : -1;
}

dsv41_status dsv41_session_append_image(dsv41_session* session, const dsv41_image* image,
                                        int all_logits, float* logits, size_t capacity,
                                        size_t* n_out) {
  if (session == nullptr) return invalid("dsv41_session_append_image: session is NULL");
  if (image == nullptr) return invalid("dsv41_session_append_image: image is NULL");
  if (n_out == nullptr) return invalid("dsv41_session_append_image: n_out is NULL");
  if (logits == nullptr && capacity > 0)
    return invalid("dsv41_session_append_image: logits is NULL with capacity > 0");
  return guarded([&] {
    auto r = session->session.append_image(*image->image, all_logits != 0);
    if (!r.is_ok()) return fail(r.status());
    return write_floats("dsv41_session_append_image", *r, logits, capacity, n_out);
  });
}

}  // extern "C"
