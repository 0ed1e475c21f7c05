// [golden] dsv41.h: tokenizer and session calls on tiny8: every bad argument named (each NULL
// pointer by name, huge counts), the buffer rule (BUFFER_TOO_SMALL writes nothing; a NULL buffer
// with capacity is refused before anything is committed), reset / fork / tokens.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "golden/capi/capi_case.hpp"

namespace dsv41::test {

TEST_CASE("capi: tokenizer arguments are named, BUFFER_TOO_SMALL writes nothing", "[golden]") {
  CapiModel m;
  const char* text = "Hello, world";
  const size_t len = std::strlen(text);
  size_t n = 0;
  std::vector<int32_t> ids(64, -7);
  require_status(dsv41_tokenize(nullptr, text, len, 1, ids.data(), ids.size(), &n),
                 DSV41_ERR_INVALID_ARGUMENT, "dsv41_tokenize: model is NULL");
  require_status(dsv41_tokenize(m.model, text, len, 1, ids.data(), ids.size(), nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "dsv41_tokenize: n_out is NULL");
  require_status(dsv41_tokenize(m.model, nullptr, 3, 1, ids.data(), ids.size(), &n),
                 DSV41_ERR_INVALID_ARGUMENT, "text is NULL with text_len > 0");
  require_status(dsv41_tokenize(m.model, text, len, 1, nullptr, 100, &n),
                 DSV41_ERR_INVALID_ARGUMENT, "ids is NULL with capacity > 0");
  // Size query, then too small: *n_out set, the buffer untouched.
  REQUIRE(dsv41_tokenize(m.model, text, len, 1, nullptr, 0, &n) == DSV41_ERR_BUFFER_TOO_SMALL);
  const size_t want = n;
  REQUIRE(want >= 2);
  require_status(dsv41_tokenize(m.model, text, len, 1, ids.data(), want - 1, &n),
                 DSV41_ERR_BUFFER_TOO_SMALL, "do not fit capacity");
  REQUIRE(n == want);
  for (int32_t v : ids) REQUIRE(v == -7);
  REQUIRE(dsv41_tokenize(m.model, text, len, 1, ids.data(), ids.size(), &n) == DSV41_OK);
  REQUIRE(n == want);

  char buf[64];
  std::memset(buf, '#', sizeof buf);
  size_t out = 0;
  require_status(dsv41_detokenize(m.model, nullptr, 2, buf, sizeof buf, &out),
                 DSV41_ERR_INVALID_ARGUMENT, "ids is NULL with n > 0");
  require_status(dsv41_detokenize(m.model, ids.data(), n, buf, sizeof buf, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "len_out is NULL");
  require_status(dsv41_detokenize(m.model, ids.data(), n, nullptr, 5, &out),
                 DSV41_ERR_INVALID_ARGUMENT, "buf is NULL with capacity > 0");
  require_status(dsv41_detokenize(m.model, ids.data(), SIZE_MAX, buf, sizeof buf, &out),
                 DSV41_ERR_INVALID_ARGUMENT, "n is too large");
  require_status(dsv41_detokenize(m.model, ids.data(), n, buf, 4, &out), DSV41_ERR_BUFFER_TOO_SMALL,
                 "bytes do not fit");
  REQUIRE(out == len);
  for (char c : buf) REQUIRE(c == '#');
  REQUIRE(dsv41_detokenize(m.model, ids.data(), n, buf, sizeof buf, &out) == DSV41_OK);
  REQUIRE(std::string(buf, out) == text);
  REQUIRE(std::string(dsv41_version()).size() > 0);
}

TEST_CASE("capi: model facts match ModelInfo, NULL gives the documented defaults", "[golden]") {
  CapiModel m;
  CHECK(dsv41_model_vocab_size(m.model) > 0);
  CHECK(dsv41_model_hidden_size(m.model) == 96);  // tiny8
  CHECK(dsv41_model_max_context(m.model) > 0);
  CHECK(std::string(dsv41_model_backend(m.model)) == "cpu");
  // tiny8 declares the released vision_config and image token but has no tower tensors.
  CHECK(dsv41_model_image_token(m.model) >= 0);
  CHECK(std::string(dsv41_model_image_encoder(m.model)).empty());
  CHECK(dsv41_model_hidden_size(nullptr) == 0);
  CHECK(dsv41_model_max_context(nullptr) == 0);
  CHECK(dsv41_model_image_token(nullptr) == -1);
  CHECK(std::string(dsv41_model_backend(nullptr)).empty());
  CHECK(std::string(dsv41_model_image_encoder(nullptr)).empty());
}

TEST_CASE("capi: session append arguments, failure effects, reset / fork / tokens", "[golden]") {
  CapiModel m;
  dsv41_session_params sp = dsv41_session_default_params();
  sp.max_context = 64;
  dsv41_session* s = nullptr;
  REQUIRE(dsv41_session_create(m.model, &sp, &s) == DSV41_OK);
  const int64_t V = dsv41_model_vocab_size(m.model);
  std::vector<float> logits(static_cast<size_t>(V) * 4);
  size_t n = 0;
  const int32_t ids[3] = {0, 17, 5};
  require_status(dsv41_session_append(nullptr, ids, 3, 0, logits.data(), logits.size(), &n),
                 DSV41_ERR_INVALID_ARGUMENT, "dsv41_session_append: session is NULL");
  require_status(dsv41_session_append(s, ids, 3, 0, logits.data(), logits.size(), nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "n_out is NULL");
  require_status(dsv41_session_append(s, nullptr, 3, 0, logits.data(), logits.size(), &n),
                 DSV41_ERR_INVALID_ARGUMENT, "ids is NULL with n > 0");
  require_status(dsv41_session_append(s, ids, SIZE_MAX, 0, logits.data(), logits.size(), &n),
                 DSV41_ERR_INVALID_ARGUMENT, "n is too large");
  // A NULL buffer with a capacity is refused before the append: nothing committed.
  require_status(dsv41_session_append(s, ids, 3, 0, nullptr, 1000, &n), DSV41_ERR_INVALID_ARGUMENT,
                 "logits is NULL with capacity > 0");
  REQUIRE(dsv41_session_position(s) == 0);
  // Too small a buffer: the tokens ARE committed (documented), the logits not written.
  std::fill(logits.begin(), logits.end(), -1.0f);
  require_status(dsv41_session_append(s, ids, 3, 1, logits.data(), static_cast<size_t>(V), &n),
                 DSV41_ERR_BUFFER_TOO_SMALL, "logits do not fit");
  REQUIRE(n == static_cast<size_t>(3 * V));
  REQUIRE(dsv41_session_position(s) == 3);
  for (float v : logits) REQUIRE(v == -1.0f);
  // A bad id commits nothing and names it.
  const int32_t bad[2] = {1, static_cast<int32_t>(V)};
  require_status(dsv41_session_append(s, bad, 2, 0, logits.data(), logits.size(), &n),
                 DSV41_ERR_INVALID_ARGUMENT, "[1]");
  REQUIRE(dsv41_session_position(s) == 3);

  // tokens / fork / reset.
  size_t nt = 0;
  REQUIRE(dsv41_session_tokens(s, nullptr, 0, &nt) == DSV41_ERR_BUFFER_TOO_SMALL);
  REQUIRE(nt == 3);
  int32_t got[3] = {-1, -1, -1};
  REQUIRE(dsv41_session_tokens(s, got, 3, &nt) == DSV41_OK);
  REQUIRE((got[0] == 0 && got[1] == 17 && got[2] == 5));
  require_status(dsv41_session_tokens(s, nullptr, 3, &nt), DSV41_ERR_INVALID_ARGUMENT,
                 "ids is NULL with capacity > 0");
  dsv41_session* f = nullptr;
  require_status(dsv41_session_fork(s, nullptr), DSV41_ERR_INVALID_ARGUMENT, "out is NULL");
  require_status(dsv41_session_fork(nullptr, &f), DSV41_ERR_INVALID_ARGUMENT, "session is NULL");
  REQUIRE(f == nullptr);
  REQUIRE(dsv41_session_fork(s, &f) == DSV41_OK);
  const int32_t next[1] = {9};
  std::vector<float> a(static_cast<size_t>(V)), b(static_cast<size_t>(V));
  REQUIRE(dsv41_session_append(s, next, 1, 0, a.data(), a.size(), &n) == DSV41_OK);
  REQUIRE(dsv41_session_append(f, next, 1, 0, b.data(), b.size(), &n) == DSV41_OK);
  REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);  // same state, same logits
  REQUIRE(dsv41_session_reset(s) == DSV41_OK);
  REQUIRE(dsv41_session_position(s) == 0);
  REQUIRE(dsv41_session_position(f) == 4);  // the fork is independent
  require_status(dsv41_session_reset(nullptr), DSV41_ERR_INVALID_ARGUMENT, "session is NULL");
  dsv41_session_free(f);
  dsv41_session_free(s);
}

}  // namespace dsv41::test
