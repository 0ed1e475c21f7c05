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
import os
import queue
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

from . import _ffi

__all__ = ["Dsv41Error", "Model", "Session", "Engine", "Event"]


class Dsv41Error(RuntimeError):
    """A failed libdsv41 call: `status` is the dsv41_status name, the message names the field."""

    def __init__(self, status: int, message: str):
        self.status = _ffi.status_name(status)
        super().__init__(f"{self.status}: {message}")


def _check(status: int) -> None:
    if status != 0:
        raise Dsv41Error(status, _ffi.last_error())


class Model:
    """A loaded checkpoint directory (config.json, shards, tokenizer.json)."""

    def __init__(self, model_dir: str, threads: int = 0, backend: str = ""):
        lib = _ffi.lib()
        params = lib.dsv41_model_default_params()
        params.model_dir = os.fsencode(model_dir)
        params.threads = threads
        params.backend = backend.encode() if backend else None
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

    def detokenize(self, ids: Sequence[int]) -> str:
        arr = (ctypes.c_int32 * len(ids))(*ids)
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


class Session:
    """One sequence driven synchronously: append tokens, get logits."""

    def __init__(self, model: Model, max_context: int = 262144, chunk_tokens: int = 2048):
        lib = _ffi.lib()
        params = lib.dsv41_session_default_params()
        params.max_context = max_context
        params.chunk_tokens = chunk_tokens
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
        arr = (ctypes.c_int32 * len(ids))(*ids)
        cap = self._vocab * (len(ids) if all_logits else 1)
        out = (ctypes.c_float * cap)()
        n = ctypes.c_size_t()
        _check(_ffi.lib().dsv41_session_append(self._handle, arr, len(ids), int(all_logits), out,
                                               cap, ctypes.byref(n)))
        return list(out[: n.value])

    @property
    def position(self) -> int:
        return _ffi.lib().dsv41_session_position(self._handle)

    def rollback(self, n: int) -> None:
        """Undoes the last n positions exactly (speculative decoding; at most 16)."""
        _check(_ffi.lib().dsv41_session_rollback(self._handle, n))


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


class Engine:
    """The scheduler: streaming generation of several requests at once."""

    def __init__(self, model: Model, max_sequences: int = 2, max_batched_tokens: int = 2048,
                 max_context: int = 262144, kv_bytes: int = 2_700_000_000):
        lib = _ffi.lib()
        params = lib.dsv41_engine_default_params()
        params.max_sequences = max_sequences
        params.max_batched_tokens = max_batched_tokens
        params.max_context = max_context
        params.kv_bytes = kv_bytes
        handle = ctypes.c_void_p()
        _check(lib.dsv41_engine_create(model._handle, ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle
        self._callbacks = {}  # keeps ctypes callbacks alive until their request finishes

    def close(self) -> None:
        if self._handle:
            _ffi.lib().dsv41_engine_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def generate(self, prompt: Sequence[int], max_tokens: int = -1, temperature: float = 1.0,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 seed: Optional[int] = None, stop: Sequence[str] = (),
                 stop_token_ids: Sequence[int] = (), ignore_eos: bool = False) -> Iterator[Event]:
        """Submits one request and yields its events; the last has finished=True. A failed
        request raises Dsv41Error after its partial events."""
        lib = _ffi.lib()
        sp = lib.dsv41_sampler_default_params()
        sp.temperature, sp.top_k, sp.top_p, sp.min_p = temperature, top_k, top_p, min_p
        if seed is not None:
            sp.has_seed, sp.seed = 1, seed
        st = lib.dsv41_stop_default_params()
        stop_bytes = [s.encode("utf-8") for s in stop]
        stop_arr = (ctypes.c_char_p * len(stop_bytes))(*stop_bytes)
        ids_arr = (ctypes.c_int32 * len(stop_token_ids))(*stop_token_ids)
        st.stop, st.n_stop = ctypes.cast(stop_arr, ctypes.POINTER(ctypes.c_char_p)), len(stop_bytes)
        st.stop_token_ids, st.n_stop_token_ids = ids_arr, len(stop_token_ids)
        st.max_tokens, st.ignore_eos = max_tokens, int(ignore_eos)
        events: "queue.Queue[tuple]" = queue.Queue()

        def on_event(ev_ptr, _user):
            ev = ev_ptr.contents
            text = ctypes.string_at(ev.text, ev.text_len).decode("utf-8") if ev.text_len else ""
            err = ev.error_message.decode("utf-8") if ev.error_message else ""
            events.put((Event(ev.request_id, ev.kind == 1, ev.token, text,
                              {1: "stop", 2: "length"}.get(ev.finish_reason, ""),
                              ev.prompt_tokens, ev.cached_tokens, ev.completion_tokens),
                        ev.status, err))

        cb = _ffi.EVENT_CALLBACK(on_event)
        prompt_arr = (ctypes.c_int32 * len(prompt))(*prompt)
        rid = ctypes.c_uint64()
        _check(lib.dsv41_engine_submit(self._handle, prompt_arr, len(prompt), ctypes.byref(sp),
                                       ctypes.byref(st), cb, None, ctypes.byref(rid)))
        self._callbacks[rid.value] = cb
        try:
            while True:
                event, status, err = events.get()
                if event.finished and status != 0:
                    raise Dsv41Error(status, err)
                yield event
                if event.finished:
                    return
        finally:
            self._callbacks.pop(rid.value, None)

    def cancel(self, request_id: int) -> None:
        _check(_ffi.lib().dsv41_engine_cancel(self._handle, request_id))
