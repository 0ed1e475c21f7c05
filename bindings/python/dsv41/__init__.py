"""Python binding of libdsv41 over its C ABI (dsv41.h) with ctypes: no compiled extension.

    import dsv41
    model = dsv41.Model("path/to/model")
    ids = model.tokenize("<｜begin▁of▁sentence｜>Hello,")
    with dsv41.Engine(model) as engine:
        for event in engine.generate(ids, max_tokens=12, temperature=0.0):
            print(event.token, event.text)

The shared library is found through DSV41_LIBRARY (a path to libdsv41.so), else the build tree
next to this package (build/libdsv41/src/capi), else the system loader path.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence

from . import _ffi

__all__ = ["Dsv41Error", "Model", "Session", "Engine", "Event", "Image"]


class Dsv41Error(RuntimeError):
    """A failed libdsv41 call: `status` is the dsv41_status name, the message names the field."""

    def __init__(self, status: int, message: str):
        self.status = _ffi.status_name(status)
        super().__init__(f"{self.status}: {message}")


def _check(status: int) -> None:
    if status != 0:
        raise Dsv41Error(status, _ffi.last_error())


_RANGES = {ctypes.c_int32: (-(2**31), 2**31 - 1), ctypes.c_int64: (-(2**63), 2**63 - 1),
           ctypes.c_uint64: (0, 2**64 - 1), ctypes.c_size_t: (0, 2**64 - 1)}


def _int(name: str, value, ctype=ctypes.c_int64) -> int:
    """value as an int that `ctype` holds; ValueError naming `name` otherwise (ctypes would wrap
    2**32 + 5 to 5 silently)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    lo, hi = _RANGES[ctype]
    if not lo <= value <= hi:
        raise ValueError(f"{name} = {value} is outside [{lo}, {hi}]")
    return value


def _i32_array(name: str, values: Sequence[int]):
    for i, v in enumerate(values):
        _int(f"{name}[{i}]", v, ctypes.c_int32)
    return (ctypes.c_int32 * len(values))(*values)


class Model:
    """A loaded checkpoint directory (config.json, shards, tokenizer.json)."""

    def __init__(self, model_dir: str, threads: int = 0, backend: str = "",
                 dspark: bool = False):
        self._handle = None  # close() is safe even when the load below fails
        lib = _ffi.lib()
        params = lib.dsv41_model_default_params()
        params.model_dir = os.fsencode(model_dir)
        params.threads = _int("threads", threads, ctypes.c_int32)
        params.backend = backend.encode() if backend else None
        params.dspark = int(bool(dspark))  # also load the DSpark draft module (mtp.*)
        handle = ctypes.c_void_p()
        _check(lib.dsv41_model_load(ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle

    def close(self) -> None:
        if self._handle:
            _ffi.lib().dsv41_model_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    @property
    def vocab_size(self) -> int:
        return _ffi.lib().dsv41_model_vocab_size(self._handle)

    @property
    def eos_token(self) -> int:
        return _ffi.lib().dsv41_model_eos_token(self._handle)

    @property
    def hidden_size(self) -> int:
        return _ffi.lib().dsv41_model_hidden_size(self._handle)

    @property
    def max_context(self) -> int:
        """Longest sequence (the config's, capped by the backend)."""
        return _ffi.lib().dsv41_model_max_context(self._handle)

    @property
    def image_token(self) -> int:
        """Token id of every image-span position (-1: none)."""
        return _ffi.lib().dsv41_model_image_token(self._handle)

    @property
    def backend(self) -> str:
        """"cpu" or "cuda"."""
        return _ffi.lib().dsv41_model_backend(self._handle).decode()

    @property
    def image_encoder(self) -> str:
        """Where encode_image runs the vision tower: "cpu", "cuda", or "" (no tower)."""
        return _ffi.lib().dsv41_model_image_encoder(self._handle).decode()

    def tokenize(self, text: str, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        while True:
            buf = (ctypes.c_int32 * cap)()
            n = ctypes.c_size_t()
            st = _ffi.lib().dsv41_tokenize(self._handle, data, len(data), int(parse_special), buf,
                                           cap, ctypes.byref(n))
            if st == _ffi.BUFFER_TOO_SMALL:
                cap = n.value
                continue
            _check(st)
            return list(buf[: n.value])

    def encode_image(self, width: int, height: int, rgb: bytes) -> "Image":
        """8-bit RGB pixels ([height][width][3] bytes) through the vision tower."""
        data = bytes(rgb)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        handle = ctypes.c_void_p()
        _check(_ffi.lib().dsv41_model_encode_image(self._handle, buf, len(data),
                                                   _int("width", width, ctypes.c_int32),
                                                   _int("height", height, ctypes.c_int32),
                                                   ctypes.byref(handle)))
        return Image(handle)

    def encode_image_file(self, data: bytes, max_pixels: int = 0) -> "Image":
        """A PNG, JPEG, GIF or WebP file's bytes through the vision tower (0 = the default pixel
        limit)."""
        data = bytes(data)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        handle = ctypes.c_void_p()
        _check(_ffi.lib().dsv41_model_encode_image_file(self._handle, buf, len(data),
                                                        _int("max_pixels", max_pixels),
                                                        ctypes.byref(handle)))
        return Image(handle)

    @property
    def bos_token(self) -> int:
        return _ffi.lib().dsv41_model_bos_token(self._handle)

    def detokenize(self, ids: Sequence[int]) -> str:
        arr = _i32_array("ids", ids)
        cap = 16 * len(ids) + 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = ctypes.c_size_t()
            st = _ffi.lib().dsv41_detokenize(self._handle, arr, len(ids), buf, cap, ctypes.byref(n))
            if st == _ffi.BUFFER_TOO_SMALL:
                cap = n.value
                continue
            _check(st)
            return buf.raw[: n.value].decode("utf-8")


class Image:
    """One encoded image (Model.encode_image): its span's input embeddings."""

    def __init__(self, handle):
        self._handle = handle

    def close(self) -> None:
        if self._handle:
            _ffi.lib().dsv41_image_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    @property
    def positions(self) -> int:
        """Sequence positions the image takes: rows * (cols + 1) + 2."""
        return _ffi.lib().dsv41_image_positions(self._handle)


class Session:
    """One sequence driven synchronously: append tokens, get logits."""

    def __init__(self, model: Model, max_context: int = 262144, chunk_tokens: int = 2048):
        self._handle = None
        lib = _ffi.lib()
        params = lib.dsv41_session_default_params()
        params.max_context = _int("max_context", max_context)
        params.chunk_tokens = _int("chunk_tokens", chunk_tokens)
        handle = ctypes.c_void_p()
        _check(lib.dsv41_session_create(model._handle, ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle
        self._vocab = model.vocab_size

    def close(self) -> None:
        if self._handle:
            _ffi.lib().dsv41_session_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def append(self, ids: Sequence[int], all_logits: bool = False) -> list[float]:
        """Logits of the last token ([vocab]) or of every appended token ([n * vocab])."""
        arr = _i32_array("ids", ids)
        cap = self._vocab * (len(ids) if all_logits else 1)
        out = (ctypes.c_float * cap)()
        n = ctypes.c_size_t()
        _check(_ffi.lib().dsv41_session_append(self._handle, arr, len(ids), int(all_logits), out,
                                               cap, ctypes.byref(n)))
        return list(out[: n.value])

    def append_image(self, image: Image, all_logits: bool = False) -> list[float]:
        """Appends the image span; logits of its last position or of every position."""
        cap = self._vocab * (image.positions if all_logits else 1)
        out = (ctypes.c_float * cap)()
        n = ctypes.c_size_t()
        _check(_ffi.lib().dsv41_session_append_image(self._handle, image._handle,
                                                     int(all_logits), out, cap, ctypes.byref(n)))
        return list(out[: n.value])

    @property
    def position(self) -> int:
        return _ffi.lib().dsv41_session_position(self._handle)

    def rollback(self, n: int) -> None:
        """Undoes the last n positions exactly (speculative decoding; at most 16)."""
        _check(_ffi.lib().dsv41_session_rollback(self._handle, _int("n", n)))

    def reset(self) -> None:
        """Back to an empty sequence (position 0)."""
        _check(_ffi.lib().dsv41_session_reset(self._handle))

    def fork(self) -> "Session":
        """An independent copy of this session's state."""
        handle = ctypes.c_void_p()
        _check(_ffi.lib().dsv41_session_fork(self._handle, ctypes.byref(handle)))
        other = Session.__new__(Session)
        other._handle, other._vocab = handle, self._vocab
        return other

    @property
    def tokens(self) -> list[int]:
        n = ctypes.c_size_t()
        _check_size = _ffi.lib().dsv41_session_tokens(self._handle, None, 0, ctypes.byref(n))
        if _check_size not in (0, _ffi.BUFFER_TOO_SMALL):
            _check(_check_size)
        buf = (ctypes.c_int32 * n.value)()
        _check(_ffi.lib().dsv41_session_tokens(self._handle, buf, n.value, ctypes.byref(n)))
        return list(buf[: n.value])


@dataclass
class Event:
    request_id: int
    finished: bool
    token: int
    text: str
    finish_reason: str  # "stop", "length" or "" (still running / cancelled / error)
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    # Requests with top_logprobs >= 0: the token's log-probability (the model's raw
    # distribution) and the most likely tokens at its position as (token, logprob), descending.
    logprob: Optional[float] = None
    top_logprobs: list = field(default_factory=list)


# One ctypes callback for every engine of the process, never freed: a request's callback may run
# on the scheduler thread after its generator was abandoned, and even after dsv41_engine_free
# returned on that thread (the engine then finishes its requests with aborted events). Events
# are routed by user_data (the engine's key) and request id to the generator's queue.
_ENGINES: dict = {}  # key -> _Routes
_ENGINE_KEYS = itertools.count(1)


class _Routes:
    def __init__(self):
        self.lock = threading.Lock()
        self.queues: dict = {}  # request id -> queue (made by whichever side comes first)
        self.abandoned: set = set()  # request ids whose generator exited before FINISHED

    def queue_of(self, rid: int) -> "queue.Queue":
        with self.lock:
            return self.queues.setdefault(rid, queue.Queue())


def _dispatch(ev_ptr, user_data) -> None:
    # Never raises into C: a lost FINISHED event would leave a generator waiting forever.
    try:
        routes = _ENGINES.get(user_data or 0)
        if routes is None:
            return
        ev = ev_ptr.contents
        finished = ev.kind == 1
        try:
            text = ctypes.string_at(ev.text, ev.text_len).decode("utf-8", "replace")
            err = ev.error_message.decode("utf-8", "replace") if ev.error_message else ""
            logprob = ev.logprob if ev.has_logprob else None
            top = [(ev.top_logprob_tokens[i], ev.top_logprobs[i])
                   for i in range(ev.n_top_logprobs)] if ev.has_logprob else []
            item = (Event(ev.request_id, finished, ev.token, text,
                          {1: "stop", 2: "length"}.get(ev.finish_reason, ""), ev.prompt_tokens,
                          ev.cached_tokens, ev.completion_tokens, logprob, top), ev.status, err)
        except Exception as e:  # noqa: BLE001 - reported through the event instead
            finished = True
            item = (Event(ev.request_id, True, -1, "", "", 0, 0, 0), 11,
                    f"python binding: could not read the event: {e!r}")
        with routes.lock:
            if finished and ev.request_id in routes.abandoned:
                routes.abandoned.discard(ev.request_id)
                routes.queues.pop(ev.request_id, None)
                return
            q = routes.queues.setdefault(ev.request_id, queue.Queue())
        q.put(item)
    except BaseException:  # noqa: BLE001 - nothing may cross back into C
        pass


_DISPATCH = _ffi.EVENT_CALLBACK(_dispatch)


class Engine:
    """The scheduler: streaming generation of several requests at once."""

    def __init__(self, model: Model, max_sequences: int = 2, max_batched_tokens: int = 2048,
                 max_context: int = 262144, kv_bytes: int = 2_700_000_000,
                 speculative_tokens: int = 0, speculative_method: str = "ngram",
                 speculative_confidence: float = 0.0):
        self._handle = None
        lib = _ffi.lib()
        params = lib.dsv41_engine_default_params()
        params.max_sequences = _int("max_sequences", max_sequences, ctypes.c_int32)
        params.max_batched_tokens = _int("max_batched_tokens", max_batched_tokens)
        params.max_context = _int("max_context", max_context)
        params.kv_bytes = _int("kv_bytes", kv_bytes)
        # Prompt-lookup drafts verified per decode step (0 = off; docs/speculative.md).
        params.speculative_tokens = _int("speculative_tokens", speculative_tokens, ctypes.c_int32)
        if speculative_method not in ("ngram", "dspark"):
            raise ValueError(f'speculative_method = "{speculative_method}" must be "ngram" or '
                             '"dspark"')
        params.speculative_dspark = int(speculative_method == "dspark")
        params.speculative_confidence = float(speculative_confidence)
        self._key = next(_ENGINE_KEYS)
        self._routes = _Routes()
        _ENGINES[self._key] = self._routes
        handle = ctypes.c_void_p()
        try:
            _check(lib.dsv41_engine_create(model._handle, ctypes.byref(params),
                                           ctypes.byref(handle)))
        except BaseException:
            _ENGINES.pop(self._key, None)
            raise
        self._handle = handle

    def close(self) -> None:
        """Frees the engine: running requests end (their generators raise `aborted`)."""
        if getattr(self, "_handle", None):
            _ffi.lib().dsv41_engine_free(self._handle)
            self._handle = None
            _ENGINES.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def generate(self, prompt: Sequence[int], max_tokens: int = -1, temperature: float = 1.0,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 seed: Optional[int] = None, stop: Sequence[str] = (),
                 stop_token_ids: Sequence[int] = (), ignore_eos: bool = False,
                 top_logprobs: int = -1, images: Sequence[tuple] = (),
                 min_tokens: int = 0) -> Iterator[Event]:
        """Submits one request and yields its events; the last has finished=True. A failed
        request raises Dsv41Error after its partial events. Leaving the loop early (break, an
        exception, the generator collected) cancels the request.

        top_logprobs >= 0 (at most 20): token events carry `logprob` and that many
        `top_logprobs`. images: (offset, Image) pairs, each image's span filling the prompt's
        image tokens from offset (Model.encode_image); the engine keeps its own reference.
        min_tokens: no stop token or stop string ends the request before that many tokens."""
        if not self._handle:
            raise Dsv41Error(1, "generate: the engine is closed")
        lib = _ffi.lib()
        sp = lib.dsv41_sampler_default_params()
        sp.temperature, sp.top_p, sp.min_p = temperature, top_p, min_p
        sp.top_k = _int("top_k", top_k, ctypes.c_int32)
        if seed is not None:
            sp.has_seed, sp.seed = 1, _int("seed", seed)
        st = lib.dsv41_stop_default_params()
        stop_bytes = [s.encode("utf-8") for s in stop]
        stop_arr = (ctypes.c_char_p * len(stop_bytes))(*stop_bytes)
        ids_arr = _i32_array("stop_token_ids", stop_token_ids)
        st.stop, st.n_stop = ctypes.cast(stop_arr, ctypes.POINTER(ctypes.c_char_p)), len(stop_bytes)
        st.stop_token_ids, st.n_stop_token_ids = ids_arr, len(stop_token_ids)
        st.max_tokens, st.ignore_eos = _int("max_tokens", max_tokens), int(ignore_eos)
        prompt_arr = _i32_array("prompt", prompt)
        opts = lib.dsv41_request_default_options()
        opts.top_logprobs = _int("top_logprobs", top_logprobs, ctypes.c_int32)
        opts.min_tokens = _int("min_tokens", min_tokens)
        for i, pair in enumerate(images):
            if (not isinstance(pair, tuple) or len(pair) != 2
                    or not isinstance(pair[1], Image) or not pair[1]._handle):
                raise ValueError(f"images[{i}] must be an (offset, open Image) pair")
        image_arr = (ctypes.c_void_p * len(images))(*[img._handle.value for _, img in images])
        offset_arr = (ctypes.c_int64 * len(images))(
            *[_int(f"images[{i}] offset", off) for i, (off, _) in enumerate(images)])
        opts.images = ctypes.cast(image_arr, ctypes.POINTER(ctypes.c_void_p))
        opts.image_offsets = ctypes.cast(offset_arr, ctypes.POINTER(ctypes.c_int64))
        opts.n_images = len(images)
        rid = ctypes.c_uint64()
        _check(lib.dsv41_engine_submit_with(self._handle, prompt_arr, len(prompt),
                                            ctypes.byref(sp), ctypes.byref(st), ctypes.byref(opts),
                                            _DISPATCH, ctypes.c_void_p(self._key),
                                            ctypes.byref(rid)))
        routes, request = self._routes, rid.value
        events = routes.queue_of(request)
        finished = False
        try:
            while True:
                event, status, err = events.get()
                finished = event.finished
                if finished and status != 0:
                    raise Dsv41Error(status, err)
                yield event
                if finished:
                    return
        finally:
            with routes.lock:
                if finished:
                    routes.queues.pop(request, None)
                else:  # its FINISHED event is still to come: drop it there
                    routes.abandoned.add(request)
                    routes.queues.pop(request, None)
            if not finished and self._handle:
                lib.dsv41_engine_cancel(self._handle, request)  # may have just finished: ignored

    def cancel(self, request_id: int) -> None:
        _check(_ffi.lib().dsv41_engine_cancel(self._handle, _int("request_id", request_id,
                                                                ctypes.c_uint64)))
