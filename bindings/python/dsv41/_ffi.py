"""ctypes declarations of every function of dsv41.h (libdsv41/include/dsv41/dsv41.h); a function
used without a declaration here would get ctypes' default int restype and truncate pointers."""

import ctypes
import os
from pathlib import Path

BUFFER_TOO_SMALL = 12
_STATUS_NAMES = ["ok", "invalid_argument", "not_found", "corrupt_file", "unsupported", "io_error",
                 "out_of_memory", "context_overflow", "cancelled", "aborted", "timeout", "internal",
                 "buffer_too_small"]


class ModelParams(ctypes.Structure):
    _fields_ = [("model_dir", ctypes.c_char_p), ("threads", ctypes.c_int32),
                ("backend", ctypes.c_char_p), ("dspark", ctypes.c_int)]


class SessionParams(ctypes.Structure):
    _fields_ = [("max_context", ctypes.c_int64), ("chunk_tokens", ctypes.c_int64)]


class EngineParams(ctypes.Structure):
    _fields_ = [("max_sequences", ctypes.c_int32), ("max_batched_tokens", ctypes.c_int64),
                ("max_context", ctypes.c_int64), ("kv_bytes", ctypes.c_int64),
                ("prefix_cache_entries", ctypes.c_int32), ("max_queue", ctypes.c_int32),
                ("speculative_tokens", ctypes.c_int32), ("speculative_dspark", ctypes.c_int32),
                ("speculative_confidence", ctypes.c_float)]


class SamplerParams(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float),
                ("repetition_penalty", ctypes.c_float), ("presence_penalty", ctypes.c_float),
                ("frequency_penalty", ctypes.c_float), ("has_seed", ctypes.c_int),
                ("seed", ctypes.c_int64), ("logit_bias_ids", ctypes.POINTER(ctypes.c_int32)),
                ("logit_bias_values", ctypes.POINTER(ctypes.c_float)),
                ("n_logit_bias", ctypes.c_size_t)]


class StopParams(ctypes.Structure):
    _fields_ = [("stop", ctypes.POINTER(ctypes.c_char_p)), ("n_stop", ctypes.c_size_t),
                ("stop_token_ids", ctypes.POINTER(ctypes.c_int32)),
                ("n_stop_token_ids", ctypes.c_size_t), ("max_tokens", ctypes.c_int64),
                ("ignore_eos", ctypes.c_int), ("include_stop_str_in_output", ctypes.c_int)]


class SpeculativeParams(ctypes.Structure):
    _fields_ = [("max_draft_tokens", ctypes.c_int32), ("dspark", ctypes.c_int32),
                ("confidence_threshold", ctypes.c_float), ("min_ngram", ctypes.c_int32),
                ("max_ngram", ctypes.c_int32), ("lookback", ctypes.c_int64),
                ("has_seed", ctypes.c_int), ("seed", ctypes.c_int64)]


class SpeculativeStats(ctypes.Structure):
    _fields_ = [("rounds", ctypes.c_int64), ("drafted", ctypes.c_int64),
                ("accepted", ctypes.c_int64), ("emitted", ctypes.c_int64)]


class EventStruct(ctypes.Structure):
    _fields_ = [("request_id", ctypes.c_uint64), ("kind", ctypes.c_int), ("token", ctypes.c_int32),
                ("text", ctypes.c_void_p), ("text_len", ctypes.c_size_t),
                ("finish_reason", ctypes.c_int), ("status", ctypes.c_int),
                ("error_message", ctypes.c_char_p), ("prompt_tokens", ctypes.c_int64),
                ("cached_tokens", ctypes.c_int64), ("completion_tokens", ctypes.c_int64),
                ("has_logprob", ctypes.c_int), ("logprob", ctypes.c_float),
                ("top_logprob_tokens", ctypes.POINTER(ctypes.c_int32)),
                ("top_logprobs", ctypes.POINTER(ctypes.c_float)),
                ("n_top_logprobs", ctypes.c_size_t)]


class RequestOptions(ctypes.Structure):
    _fields_ = [("top_logprobs", ctypes.c_int32), ("images", ctypes.POINTER(ctypes.c_void_p)),
                ("image_offsets", ctypes.POINTER(ctypes.c_int64)), ("n_images", ctypes.c_size_t),
                ("min_tokens", ctypes.c_int64)]


EVENT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.POINTER(EventStruct), ctypes.c_void_p)

_lib = None


def _find_library() -> str:
    explicit = os.environ.get("DSV41_LIBRARY")
    if explicit:
        return explicit
    root = Path(__file__).resolve().parents[3]
    for candidate in (root / "build/libdsv41/src/capi/libdsv41.so",):
        if candidate.exists():
            return str(candidate)
    return "libdsv41.so"


def lib():
    global _lib
    if _lib is not None:
        return _lib
    L = ctypes.CDLL(_find_library())
    vp, i32, i64, sz = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_size_t
    P = ctypes.POINTER
    sigs = {
        "dsv41_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "dsv41_last_error_message": (ctypes.c_char_p, []),
        "dsv41_version": (ctypes.c_char_p, []),
        "dsv41_model_default_params": (ModelParams, []),
        "dsv41_model_load": (ctypes.c_int, [P(ModelParams), P(vp)]),
        "dsv41_model_free": (None, [vp]),
        "dsv41_model_vocab_size": (i64, [vp]),
        "dsv41_model_bos_token": (i32, [vp]),
        "dsv41_model_eos_token": (i32, [vp]),
        "dsv41_model_hidden_size": (i64, [vp]),
        "dsv41_model_max_context": (i64, [vp]),
        "dsv41_model_image_token": (i32, [vp]),
        "dsv41_model_backend": (ctypes.c_char_p, [vp]),
        "dsv41_model_image_encoder": (ctypes.c_char_p, [vp]),
        "dsv41_tokenize": (ctypes.c_int, [vp, ctypes.c_char_p, sz, ctypes.c_int, P(i32), sz, P(sz)]),
        "dsv41_detokenize": (ctypes.c_int, [vp, P(i32), sz, ctypes.c_char_p, sz, P(sz)]),
        "dsv41_session_default_params": (SessionParams, []),
        "dsv41_session_create": (ctypes.c_int, [vp, P(SessionParams), P(vp)]),
        "dsv41_session_free": (None, [vp]),
        "dsv41_session_append": (ctypes.c_int, [vp, P(i32), sz, ctypes.c_int, P(ctypes.c_float), sz, P(sz)]),
        "dsv41_session_position": (i64, [vp]),
        "dsv41_session_rollback": (ctypes.c_int, [vp, i64]),
        "dsv41_session_reset": (ctypes.c_int, [vp]),
        "dsv41_session_fork": (ctypes.c_int, [vp, P(vp)]),
        "dsv41_session_tokens": (ctypes.c_int, [vp, P(i32), sz, P(sz)]),
        "dsv41_model_encode_image": (ctypes.c_int, [vp, P(ctypes.c_uint8), sz, i32, i32, P(vp)]),
        "dsv41_model_encode_image_file": (ctypes.c_int, [vp, P(ctypes.c_uint8), sz, i64, P(vp)]),
        "dsv41_image_free": (None, [vp]),
        "dsv41_image_positions": (i64, [vp]),
        "dsv41_session_append_image": (ctypes.c_int, [vp, vp, ctypes.c_int, P(ctypes.c_float), sz,
                                                      P(sz)]),
        "dsv41_engine_default_params": (EngineParams, []),
        "dsv41_sampler_default_params": (SamplerParams, []),
        "dsv41_stop_default_params": (StopParams, []),
        "dsv41_engine_create": (ctypes.c_int, [vp, P(EngineParams), P(vp)]),
        "dsv41_engine_free": (None, [vp]),
        "dsv41_engine_submit": (ctypes.c_int, [vp, P(i32), sz, P(SamplerParams), P(StopParams),
                                               EVENT_CALLBACK, vp, P(ctypes.c_uint64)]),
        "dsv41_request_default_options": (RequestOptions, []),
        "dsv41_engine_submit_with": (ctypes.c_int, [vp, P(i32), sz, P(SamplerParams),
                                                    P(StopParams), P(RequestOptions),
                                                    EVENT_CALLBACK, vp, P(ctypes.c_uint64)]),
        "dsv41_engine_cancel": (ctypes.c_int, [vp, ctypes.c_uint64]),
        "dsv41_sampler_create": (ctypes.c_int, [P(SamplerParams), i64, P(vp)]),
        "dsv41_sampler_free": (None, [vp]),
        "dsv41_sampler_sample": (ctypes.c_int, [vp, P(ctypes.c_float), sz, P(i32)]),
        "dsv41_sampler_accept": (ctypes.c_int, [vp, i32]),
        "dsv41_speculative_default_params": (SpeculativeParams, []),
        "dsv41_speculative_create": (ctypes.c_int, [vp, P(SpeculativeParams), P(vp)]),
        "dsv41_speculative_free": (None, [vp]),
        "dsv41_speculative_step": (ctypes.c_int, [vp, vp, vp, i32, i64, P(i32), sz, P(sz),
                                                  P(i32)]),
        "dsv41_speculative_get_stats": (ctypes.c_int, [vp, P(SpeculativeStats)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(L, name)
        fn.restype, fn.argtypes = res, args
    _lib = L
    return L


def status_name(status: int) -> str:
    return _STATUS_NAMES[status] if 0 <= status < len(_STATUS_NAMES) else f"status {status}"


def last_error() -> str:
    return lib().dsv41_last_error_message().decode("utf-8", "replace")
