/* dsv41.h: the C ABI of libdsv41, a thin shim over the C++ API (model.hpp, session.hpp,
 * engine.hpp, sampler.hpp, speculative.hpp, image.hpp): one function per C++ call it exposes (not
 * exposed: ModelInfo's model_dir, num_layers and state sizes, Engine::stats, the TP parameters).
 * Handles are opaque. Ownership:
 * every *_load / *_create that succeeds gives the caller a handle it must release with the matching
 * *_free (NULL is accepted); strings and arrays passed in are copied before the call returns;
 * strings passed to callbacks are valid only during the callback. Errors: every fallible call
 * returns a dsv41_status; on failure dsv41_last_error_message() (thread-local, valid until the next
 * failing call on that thread) says what was wrong, naming the offending field. No call ever aborts
 * the process. */
#ifndef DSV41_H
#define DSV41_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DSV41_BUILDING_LIBRARY)
#define DSV41_CAPI __attribute__((visibility("default")))
#else
#define DSV41_CAPI
#endif

/* ---- status ---------------------------------------------------------------------------- */
typedef enum dsv41_status {
  DSV41_OK = 0,
  DSV41_ERR_INVALID_ARGUMENT = 1,
  DSV41_ERR_NOT_FOUND = 2,
  DSV41_ERR_CORRUPT_FILE = 3,
  DSV41_ERR_UNSUPPORTED = 4,
  DSV41_ERR_IO = 5,
  DSV41_ERR_OUT_OF_MEMORY = 6, /* includes an exhausted KV budget or request queue */
  DSV41_ERR_CONTEXT_OVERFLOW = 7,
  DSV41_ERR_CANCELLED = 8,
  DSV41_ERR_ABORTED = 9,
  DSV41_ERR_TIMEOUT = 10,
  DSV41_ERR_INTERNAL = 11,
  DSV41_ERR_BUFFER_TOO_SMALL = 12 /* output did not fit: *n_out holds the size needed */
} dsv41_status;

DSV41_CAPI const char* dsv41_status_name(dsv41_status status);
DSV41_CAPI const char* dsv41_last_error_message(void);
DSV41_CAPI const char* dsv41_version(void);

/* ---- model ----------------------------------------------------------------------------- */
typedef struct dsv41_model dsv41_model;

typedef struct dsv41_model_params {
  const char* model_dir; /* required */
  int32_t threads;       /* CPU reference threads; 0 = DSV41_THREADS, then all cores */
  const char* backend;   /* "cpu" | "cuda"; NULL or "" = DSV41_BACKEND. Borrowed for the call */
  int dspark;            /* 1: also load the DSpark draft module mtp.* (CPU backend) */
} dsv41_model_params;

DSV41_CAPI dsv41_model_params dsv41_model_default_params(void);
/* On success *out is a new model (free with dsv41_model_free); on failure *out is NULL. */
DSV41_CAPI dsv41_status dsv41_model_load(const dsv41_model_params* params, dsv41_model** out);
DSV41_CAPI void dsv41_model_free(dsv41_model* model);
DSV41_CAPI int64_t dsv41_model_vocab_size(const dsv41_model* model);
DSV41_CAPI int32_t dsv41_model_bos_token(const dsv41_model* model);
DSV41_CAPI int32_t dsv41_model_eos_token(const dsv41_model* model);
/* More of ModelInfo. A NULL model gives 0, -1 or "". The strings belong to the model and stay
 * valid until dsv41_model_free. */
DSV41_CAPI int64_t dsv41_model_hidden_size(const dsv41_model* model);
/* Longest sequence: the config's max_position_embeddings, capped by the backend (CUDA:
 * DSV41_CUDA_MAX_CONTEXT). */
DSV41_CAPI int64_t dsv41_model_max_context(const dsv41_model* model);
DSV41_CAPI int32_t dsv41_model_image_token(const dsv41_model* model); /* -1: none configured */
DSV41_CAPI const char* dsv41_model_backend(const dsv41_model* model); /* "cpu" | "cuda" */
/* Where dsv41_model_encode_image runs the vision tower: "cpu", "cuda", or "" (no usable tower). */
DSV41_CAPI const char* dsv41_model_image_encoder(const dsv41_model* model);

/* Writes the ids to `ids` and their count to *n_out. The buffer rule of every call with an output
 * buffer: DSV41_ERR_BUFFER_TOO_SMALL when capacity < *n_out, with *n_out set and nothing written
 * to the buffer (call again with a larger one; capacity 0 and a NULL buffer ask for the size); a
 * NULL buffer with capacity > 0 is DSV41_ERR_INVALID_ARGUMENT. */
DSV41_CAPI dsv41_status dsv41_tokenize(const dsv41_model* model, const char* text, size_t text_len,
                                       int parse_special, int32_t* ids, size_t capacity,
                                       size_t* n_out);
/* Writes the UTF-8 text (not NUL-terminated) to buf and its length to *len_out; same
 * DSV41_ERR_BUFFER_TOO_SMALL rule. */
DSV41_CAPI dsv41_status dsv41_detokenize(const dsv41_model* model, const int32_t* ids, size_t n,
                                         char* buf, size_t capacity, size_t* len_out);

/* ---- session: one sequence, driven synchronously --------------------------------------- */
typedef struct dsv41_session dsv41_session;

typedef struct dsv41_session_params {
  int64_t max_context;  /* default 262144 */
  int64_t chunk_tokens; /* prefill chunk, default 2048; 0 = one chunk */
} dsv41_session_params;

DSV41_CAPI dsv41_session_params dsv41_session_default_params(void);
/* The session keeps the model alive: the model handle may be freed before the session. */
DSV41_CAPI dsv41_status dsv41_session_create(const dsv41_model* model,
                                             const dsv41_session_params* params,
                                             dsv41_session** out);
DSV41_CAPI void dsv41_session_free(dsv41_session* session);
/* Appends n ids; writes the logits of the last token ([vocab]) or of all n tokens ([n, vocab],
 * all_logits != 0) to `logits` (capacity in floats; count in *n_out). What a failure leaves:
 * DSV41_ERR_BUFFER_TOO_SMALL: the tokens ARE committed (only the logits are not written);
 * DSV41_ERR_INVALID_ARGUMENT (a bad id, empty input, NULL buffer) and DSV41_ERR_CONTEXT_OVERFLOW:
 * nothing committed; DSV41_ERR_OUT_OF_MEMORY / DSV41_ERR_INTERNAL inside the forward pass: the
 * session is reset to position 0 (its state is discarded). */
DSV41_CAPI dsv41_status dsv41_session_append(dsv41_session* session, const int32_t* ids, size_t n,
                                             int all_logits, float* logits, size_t capacity,
                                             size_t* n_out);
DSV41_CAPI int64_t dsv41_session_position(const dsv41_session* session);
/* Undoes the last n positions exactly (at most 16, and at most what was appended since the last
 * rollback); DSV41_ERR_INVALID_ARGUMENT past those limits, nothing changed then. */
DSV41_CAPI dsv41_status dsv41_session_rollback(dsv41_session* session, int64_t n);
/* Back to an empty sequence (position 0). */
DSV41_CAPI dsv41_status dsv41_session_reset(dsv41_session* session);
/* A new, independent session with a copy of this one's state (prefix reuse, branches); free it
 * with dsv41_session_free. On failure *out is NULL. */
DSV41_CAPI dsv41_status dsv41_session_fork(const dsv41_session* session, dsv41_session** out);
/* The session's token ids (position() of them), buffer rule as dsv41_tokenize. */
DSV41_CAPI dsv41_status dsv41_session_tokens(const dsv41_session* session, int32_t* ids,
                                             size_t capacity, size_t* n_out);

/* ---- images (spec §7): pixels -> the image span's embeddings -> a session -------------- */
typedef struct dsv41_image dsv41_image;

/* Encodes 8-bit RGB pixels ([height][width][3] row-major, rgb_len = width * height * 3 bytes,
 * read during the call only) with the model's vision tower on the CPU. On success *out is a new
 * image (free with dsv41_image_free; independent of the model); on failure *out is NULL.
 * DSV41_ERR_UNSUPPORTED: the checkpoint has no vision tower; DSV41_ERR_INVALID_ARGUMENT: the
 * size, the buffer length or the aspect ratio (named in the message). */
DSV41_CAPI dsv41_status dsv41_model_encode_image(const dsv41_model* model, const uint8_t* rgb,
                                                 size_t rgb_len, int32_t width, int32_t height,
                                                 dsv41_image** out);
/* The same for a PNG, JPEG, GIF or WebP file's bytes (read during the call only), decoded as
 * PIL.Image.open(f).convert("RGB") does (GIF and WebP: the first frame; docs/vision.md), at most
 * max_pixels pixels (checked from the header; 0 = 33554432). DSV41_ERR_UNSUPPORTED also for CMYK
 * JPEG and for a format whose library the build lacks (named in the message). */
DSV41_CAPI dsv41_status dsv41_model_encode_image_file(const dsv41_model* model,
                                                      const uint8_t* bytes, size_t len,
                                                      int64_t max_pixels, dsv41_image** out);
DSV41_CAPI void dsv41_image_free(dsv41_image* image);
/* Sequence positions the image takes (rows * (cols + 1) + 2); -1 for NULL. */
DSV41_CAPI int64_t dsv41_image_positions(const dsv41_image* image);
/* Appends the image span to the session (every position carries the image token id); logits,
 * buffer rule and what a failure leaves as dsv41_session_append. DSV41_ERR_UNSUPPORTED on a
 * backend that cannot take image embeddings (nothing committed). */
DSV41_CAPI dsv41_status dsv41_session_append_image(dsv41_session* session, const dsv41_image* image,
                                                   int all_logits, float* logits, size_t capacity,
                                                   size_t* n_out);

/* ---- engine: scheduled, streaming generation ------------------------------------------- */
typedef struct dsv41_engine dsv41_engine;

typedef struct dsv41_engine_params {
  int32_t max_sequences;        /* default 2 */
  int64_t max_batched_tokens;   /* default 2048 */
  int64_t max_context;          /* default 262144 */
  int64_t kv_bytes;             /* default 2700000000 */
  int32_t prefix_cache_entries; /* default 4 */
  int32_t max_queue;            /* default 256 */
  int32_t speculative_tokens;   /* default 0 = off; 1..15 drafts per decode step
                                   (docs/speculative.md): same tokens, fewer forward passes */
  int32_t speculative_dspark;   /* 0: prompt-lookup drafts; 1: DSpark (model loaded with dspark) */
  float speculative_confidence; /* DSpark: verify drafts while their survival >= this; 0 = all */
} dsv41_engine_params;

typedef struct dsv41_sampler_params {
  float temperature;                                             /* default 1.0; 0 = greedy */
  int32_t top_k;                                                 /* 0 = off */
  float top_p;                                                   /* 1 = off */
  float min_p;                                                   /* 0 = off */
  float repetition_penalty, presence_penalty, frequency_penalty; /* 1, 0, 0 = off */
  int has_seed;
  int64_t seed;
  const int32_t* logit_bias_ids; /* n_logit_bias pairs */
  const float* logit_bias_values;
  size_t n_logit_bias;
} dsv41_sampler_params;

typedef struct dsv41_stop_params {
  const char* const* stop; /* n_stop NUL-terminated UTF-8 strings */
  size_t n_stop;
  const int32_t* stop_token_ids;
  size_t n_stop_token_ids;
  int64_t max_tokens; /* -1 = until EOS or the context is full */
  int ignore_eos;
  int include_stop_str_in_output;
} dsv41_stop_params;

typedef enum dsv41_event_kind { DSV41_EVENT_TOKEN = 0, DSV41_EVENT_FINISHED = 1 } dsv41_event_kind;
typedef enum dsv41_finish_reason {
  DSV41_FINISH_NONE = 0, /* still running, or ended by status (cancelled, error) */
  DSV41_FINISH_STOP = 1,
  DSV41_FINISH_LENGTH = 2
} dsv41_finish_reason;

typedef struct dsv41_event {
  uint64_t request_id;
  dsv41_event_kind kind;
  int32_t token;    /* TOKEN: the sampled id */
  const char* text; /* newly releasable UTF-8 text (not NUL-terminated), text_len bytes */
  size_t text_len;
  dsv41_finish_reason finish_reason; /* FINISHED */
  dsv41_status status;               /* FINISHED: DSV41_OK, DSV41_ERR_CANCELLED, ... */
  const char* error_message;         /* FINISHED with status != OK, NUL-terminated */
  int64_t prompt_tokens, cached_tokens, completion_tokens;
  /* TOKEN of a request with top_logprobs >= 0 (dsv41_request_options): the token's
   * log-probability under the model's raw distribution, and the n_top_logprobs most likely
   * tokens (descending) with theirs; the arrays are valid during the callback only. */
  int has_logprob;
  float logprob;
  const int32_t* top_logprob_tokens;
  const float* top_logprobs;
  size_t n_top_logprobs;
} dsv41_event;

/* What a request takes beyond its sampling and stop rules (GenerationRequest). */
typedef struct dsv41_request_options {
  int32_t top_logprobs; /* -1 (default): no log-probabilities; 0..20: see dsv41_event */
  /* n_images encoded images (dsv41_model_encode_image*) and where each one's span starts in
   * the prompt: prompt[image_offsets[i] .. + dsv41_image_positions(images[i])) must all be the
   * model's image token. The engine keeps its own reference: the images may be freed once
   * dsv41_engine_submit_with returns. */
  const dsv41_image* const* images;
  const int64_t* image_offsets;
  size_t n_images;
  /* Tokens generated before a stop token or stop string may end the request (StopParams
   * min_tokens; 0 = off, <= stop->max_tokens). */
  int64_t min_tokens;
} dsv41_request_options;

/* Runs on the engine's scheduler thread, one event at a time; must not block. It may call
 * dsv41_engine_submit / dsv41_engine_cancel, and dsv41_engine_free (which then returns at once:
 * the other requests get their FINISHED events with DSV41_ERR_ABORTED after this callback
 * returns, so the callback and user_data must stay valid for those). */
typedef void (*dsv41_event_callback)(const dsv41_event* event, void* user_data);

DSV41_CAPI dsv41_engine_params dsv41_engine_default_params(void);
DSV41_CAPI dsv41_sampler_params dsv41_sampler_default_params(void);
DSV41_CAPI dsv41_stop_params dsv41_stop_default_params(void);
DSV41_CAPI dsv41_status dsv41_engine_create(const dsv41_model* model,
                                            const dsv41_engine_params* params, dsv41_engine** out);
/* Cancels every request (each gets its FINISHED event with DSV41_ERR_ABORTED), joins, frees.
 * From a callback: does not join (see dsv41_event_callback). */
DSV41_CAPI void dsv41_engine_free(dsv41_engine* engine);
/* Every accepted request gets exactly one FINISHED event. NULL sampler/stop = defaults. */
DSV41_CAPI dsv41_status dsv41_engine_submit(dsv41_engine* engine, const int32_t* prompt, size_t n,
                                            const dsv41_sampler_params* sampler,
                                            const dsv41_stop_params* stop,
                                            dsv41_event_callback callback, void* user_data,
                                            uint64_t* request_id_out);
/* dsv41_engine_submit with options (NULL = dsv41_request_default_options()). Errors name the
 * field: options->images[i] NULL, an image out of place, top_logprobs out of range. */
DSV41_CAPI dsv41_request_options dsv41_request_default_options(void);
DSV41_CAPI dsv41_status dsv41_engine_submit_with(dsv41_engine* engine, const int32_t* prompt,
                                                 size_t n, const dsv41_sampler_params* sampler,
                                                 const dsv41_stop_params* stop,
                                                 const dsv41_request_options* options,
                                                 dsv41_event_callback callback, void* user_data,
                                                 uint64_t* request_id_out);
DSV41_CAPI dsv41_status dsv41_engine_cancel(dsv41_engine* engine, uint64_t request_id);

/* ---- sampler: the sampling chain of one sequence (dsv41/sampler.hpp) -------------------- */
typedef struct dsv41_sampler dsv41_sampler;

/* NULL params = defaults. Errors name the field (DSV41_ERR_INVALID_ARGUMENT). */
DSV41_CAPI dsv41_status dsv41_sampler_create(const dsv41_sampler_params* params, int64_t vocab_size,
                                             dsv41_sampler** out);
DSV41_CAPI void dsv41_sampler_free(dsv41_sampler* sampler);
/* Draws a token from one position's logits (n == vocab_size); does not record it. */
DSV41_CAPI dsv41_status dsv41_sampler_sample(dsv41_sampler* sampler, const float* logits, size_t n,
                                             int32_t* token_out);
/* Records a generated token (penalties). */
DSV41_CAPI dsv41_status dsv41_sampler_accept(dsv41_sampler* sampler, int32_t token);

/* ---- speculative decoding of one session: prompt-lookup or DSpark drafts (speculative.hpp) - */
typedef struct dsv41_speculative dsv41_speculative;

typedef struct dsv41_speculative_params {
  int32_t max_draft_tokens;   /* default 5; 1..15 */
  int32_t dspark;             /* 0: prompt lookup (the n-gram fields); 1: DSpark (model loaded
                                 with dspark; the block of dspark_block_size drafts) */
  float confidence_threshold; /* DSpark: cut drafts whose survival falls below this; 0 = none */
  int32_t min_ngram;          /* default 2 */
  int32_t max_ngram;          /* default 4; min_ngram..64 */
  int64_t lookback;           /* default 0 = the whole context */
  int has_seed;               /* acceptance draws of sampling samplers */
  int64_t seed;
} dsv41_speculative_params;

typedef struct dsv41_speculative_stats {
  int64_t rounds, drafted, accepted, emitted;
} dsv41_speculative_stats;

DSV41_CAPI dsv41_speculative_params dsv41_speculative_default_params(void);
DSV41_CAPI dsv41_status dsv41_speculative_create(const dsv41_model* model,
                                                 const dsv41_speculative_params* params,
                                                 dsv41_speculative** out);
DSV41_CAPI void dsv41_speculative_free(dsv41_speculative* spec);
/* One round (SpeculativeDecoder::step): `next` was drawn by `sampler` from the logits of the
 * session's last position and accepted, not appended. Writes the round's tokens (1 ..
 * max_draft_tokens + 1, each accepted by the sampler; all but the last appended) to tokens and
 * their count to *n_out; accepted_out (may be NULL) gets the number of kept drafts. capacity must
 * be >= max_draft_tokens + 1 (checked first: DSV41_ERR_BUFFER_TOO_SMALL, nothing done).
 * max_tokens >= 1 caps the round. */
DSV41_CAPI dsv41_status dsv41_speculative_step(dsv41_speculative* spec, dsv41_session* session,
                                               dsv41_sampler* sampler, int32_t next,
                                               int64_t max_tokens, int32_t* tokens, size_t capacity,
                                               size_t* n_out, int32_t* accepted_out);
DSV41_CAPI dsv41_status dsv41_speculative_get_stats(const dsv41_speculative* spec,
                                                    dsv41_speculative_stats* out);

#ifdef __cplusplus
}
#endif

#endif /* DSV41_H */
