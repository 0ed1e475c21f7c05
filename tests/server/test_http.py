"""Black-box HTTP tests of dsv41-server on the bundled tiny model (ctest label `server`).

    python3 tests/server/test_http.py SERVER_BINARY MODEL_DIR

Real forward passes on the CPU reference engine; greedy decoding, so the stream and the
non-stream answers must agree token for token (api-and-clients.md §2.4–2.5, §2.10, §2.11).
"""
import base64
import json
import os
import socket
import struct
import sys
import threading
import time
import unittest

from server_harness import Server, parse_sse

BINARY = MODEL = None
KEY = "test-key-0123456789"
CHAT = {"model": "deepseek-v4.1-flash", "temperature": 0, "max_tokens": 12,
        "messages": [{"role": "user", "content": "Hello, who are you?"}]}


def chat(**over):
    body = json.loads(json.dumps(CHAT))
    body.update(over)
    return body


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {name} missing")


def aborted_total(text):
    """vLLM's request_success_total{finished_reason="abort"} from a /metrics page (0 if absent)."""
    lines = [l for l in text.splitlines()
             if l.startswith("vllm:request_success_total") and "abort" in l]
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


def png(width, height):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0"
    return "data:image/png;base64," + base64.b64encode(data).decode()


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(BINARY, MODEL, "--max-context", "512", "--max-sequences", "2",
                       "--max-body-bytes", "65536", "--sse-keepalive-ms", "50", key=KEY)

    @classmethod
    def tearDownClass(cls):
        rc = cls.s.stop()
        assert rc == 0, f"exit code {rc}\n" + "".join(cls.s.log)

    def assertError(self, status, body, code, type_=None, param=None):
        self.assertEqual(status, code, body)
        err = body["error"]
        self.assertIsInstance(err["message"], str)
        self.assertTrue(err["message"])
        self.assertEqual(err["code"], code)
        self.assertIn("param", err)
        if type_:
            self.assertEqual(err["type"], type_)
        if param:
            self.assertEqual(err["param"], param)

    # --- routes -------------------------------------------------------------------------
    def test_health_open(self):
        status, _, body = self.s.request("GET", "/health", auth=False)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body), {"status": "ok"})

    def test_models(self):
        for path in ("/v1/models", "/models"):
            status, body = self.s.json("GET", path)
            self.assertEqual(status, 200)
            self.assertEqual(body["object"], "list")
            card = body["data"][0]
            self.assertEqual(card["id"], "deepseek-v4.1-flash")
            self.assertEqual(card["object"], "model")
            self.assertEqual(card["max_model_len"], 512)

    def test_version_and_tokenize(self):
        status, body = self.s.json("GET", "/version")
        self.assertEqual(status, 200)
        self.assertIsInstance(body["version"], str)
        status, tok = self.s.json("POST", "/tokenize", {"prompt": "Hello world"})
        self.assertEqual(status, 200)
        self.assertEqual(tok["count"], len(tok["tokens"]))
        status, detok = self.s.json("POST", "/detokenize", {"tokens": tok["tokens"]})
        self.assertEqual((status, detok["prompt"]), (200, "Hello world"))

    def test_unknown_route_and_method(self):
        status, body = self.s.json("GET", "/v1/nope")
        self.assertError(status, body, 404)
        status, body = self.s.json("GET", "/v1/chat/completions")
        self.assertError(status, body, 405)
        # RFC 9110 §15.5.6: a 405 names the allowed methods.
        status, headers, _ = self.s.request("PUT", "/v1/models")
        self.assertEqual((status, headers.get("allow")), (405, "GET, HEAD"))
        status, headers, _ = self.s.request("GET", "/v1/chat/completions")
        self.assertEqual((status, headers.get("allow")), (405, "POST"))

    # --- auth ---------------------------------------------------------------------------
    def test_auth(self):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY},
                        {"Authorization": "Bearer " + KEY + "x"},
                        {"Authorization": "Bearer " + KEY[:-1]}):
            status, _, data = self.s.request("POST", "/v1/chat/completions", chat(), auth=False,
                                             headers=headers)
            self.assertError(status, json.loads(data), 401, "authentication_error")
        status, _, data = self.s.request("GET", "/v1/models", auth=False)
        self.assertEqual(status, 401)
        status, _, _ = self.s.request("GET", "/metrics", auth=False)
        self.assertEqual(status, 200)  # open by default, --metrics-require-key guards it

    # --- chat ---------------------------------------------------------------------------
    def test_chat_stream_matches_non_stream(self):
        status, full = self.s.json("POST", "/v1/chat/completions", chat())
        self.assertEqual(status, 200, full)
        self.assertEqual(full["object"], "chat.completion")
        self.assertTrue(full["id"].startswith("chatcmpl-"))
        choice = full["choices"][0]
        self.assertIn(choice["finish_reason"], ("stop", "length"))
        msg = choice["message"]
        self.assertEqual(msg["role"], "assistant")
        usage = full["usage"]
        self.assertGreater(usage["prompt_tokens"], 0)
        self.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + usage["completion_tokens"])
        self.assertIn("cached_tokens", usage["prompt_tokens_details"])
        if choice["finish_reason"] == "length":
            self.assertEqual(usage["completion_tokens"], 12)

        status, headers, lines = self.s.stream_lines(
            "/v1/chat/completions", chat(stream=True, stream_options={"include_usage": True}))
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/event-stream"))
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        events = parse_sse(lines)
        ids = {e["id"] for e in events}
        self.assertEqual(len(ids), 1, "stream id must be constant")
        self.assertEqual(events[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
        usage_chunk = events[-1]
        self.assertEqual(usage_chunk["choices"], [])
        self.assertEqual(usage_chunk["usage"], usage)
        body = events[:-1]
        for e in body[:-1]:
            self.assertEqual(e["object"], "chat.completion.chunk")
            self.assertIsNone(e["choices"][0]["finish_reason"])
        for e in body[1:]:
            self.assertNotIn("role", e["choices"][0]["delta"])
        self.assertEqual(body[-1]["choices"][0]["finish_reason"], choice["finish_reason"])
        content = "".join(e["choices"][0]["delta"].get("content", "") for e in body)
        reasoning = "".join(e["choices"][0]["delta"].get("reasoning_content", "") for e in body)
        self.assertEqual(content, msg["content"] or "")
        self.assertEqual(reasoning, msg["reasoning_content"] or "")
        self.assertGreater(len(content) + len(reasoning), 0)

    def test_chat_without_usage_and_thinking_off(self):
        status, headers, lines = self.s.stream_lines(
            "/v1/chat/completions", chat(stream=True, reasoning_effort="none"))
        events = parse_sse(lines)
        self.assertTrue(all(e["choices"] for e in events), "no usage chunk unless requested")
        self.assertFalse(any("reasoning_content" in e["choices"][0]["delta"] for e in events))
        status, full = self.s.json("POST", "/v1/chat/completions",
                                   chat(thinking={"type": "disabled"}))
        self.assertEqual(status, 200)
        self.assertIsNone(full["choices"][0]["message"]["reasoning_content"])
        content = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
        self.assertEqual(content, full["choices"][0]["message"]["content"])

    def test_stop_string_and_seeded_sampling(self):
        body = chat(temperature=0.8, seed=7, top_p=0.9, top_k=20, max_completion_tokens=8,
                    stop=["zzzz"], logit_bias={"5": -100}, presence_penalty=0.5)
        a = self.s.json("POST", "/v1/chat/completions", body)
        self.assertEqual(a[0], 200, a)
        self.assertIn(a[1]["choices"][0]["finish_reason"], ("stop", "length"))
        # The same seeded request again gives the same text (this once hung: a stale disconnect
        # watch parked an I/O thread in a blocking recv; see docs/server.md).
        b = self.s.json("POST", "/v1/chat/completions", body)
        self.assertEqual(b[0], 200, b)
        self.assertEqual(a[1]["choices"][0]["message"]["content"],
                         b[1]["choices"][0]["message"]["content"])

    def test_completions(self):
        body = {"model": "deepseek-v4.1-flash", "prompt": "Hello,", "max_tokens": 10,
                "temperature": 0}
        status, full = self.s.json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, full)
        self.assertEqual(full["object"], "text_completion")
        self.assertEqual(full["usage"]["completion_tokens"], 10)
        self.assertEqual(full["choices"][0]["finish_reason"], "length")
        body["stream"] = True
        status, _, lines = self.s.stream_lines("/v1/completions", body)
        events = parse_sse(lines)
        self.assertEqual("".join(e["choices"][0]["text"] for e in events),
                         full["choices"][0]["text"])
        self.assertEqual(events[-1]["choices"][0]["finish_reason"], "length")
        # The prompt as token ids, flat or as a batch of one list (lm-eval's form): the same
        # completion; two prompts or an empty inner list are 400 naming the field.
        ids = [5, 17, 42, 9]
        status, flat = self.s.json("POST", "/v1/completions",
                                   {"prompt": ids, "max_tokens": 6, "temperature": 0})
        self.assertEqual(status, 200, flat)
        status, nested = self.s.json("POST", "/v1/completions",
                                     {"prompt": [ids], "max_tokens": 6, "temperature": 0})
        self.assertEqual(status, 200, nested)
        self.assertEqual(nested["choices"][0]["text"], flat["choices"][0]["text"])
        self.assertEqual(nested["usage"]["prompt_tokens"], 4)
        for bad, field in (([ids, ids], "only one prompt per request"), ([[]], "prompt[0]"),
                           ([[5, "x"]], "prompt[0][1]")):
            status, err = self.s.json("POST", "/v1/completions", {"prompt": bad})
            self.assertError(status, err, 400, "invalid_request_error", None)
            self.assertIn(field, err["error"]["message"])
        status, default = self.s.json("POST", "/v1/completions",
                                      {"prompt": "Hello,", "temperature": 0})
        self.assertEqual(default["usage"]["completion_tokens"], 16)  # vLLM default max_tokens
        # min_tokens: EOS cannot come before it; above the default max_tokens it is refused.
        status, at_least = self.s.json("POST", "/v1/completions",
                                       {"prompt": "Hello,", "temperature": 0.9, "seed": 3,
                                        "max_tokens": 12, "min_tokens": 12})
        self.assertEqual(status, 200, at_least)
        self.assertEqual(at_least["usage"]["completion_tokens"], 12)
        status, err = self.s.json("POST", "/v1/completions", {"prompt": "Hello,", "min_tokens": 20})
        self.assertError(status, err, 400, "invalid_request_error", "min_tokens")
        # continuous_usage_stats: every chunk carries usage, the prompt counted from the first.
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        status, _, lines = self.s.stream_lines("/v1/completions", body)
        chunks = [e for e in parse_sse(lines) if e["choices"]]
        self.assertTrue(chunks)
        for e in chunks:
            self.assertEqual(e["usage"]["prompt_tokens"], full["usage"]["prompt_tokens"], e)
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 10)

    def check_chat_logprobs(self, entries, top):
        for e in entries:
            self.assertIsInstance(e["token"], str)
            self.assertLessEqual(e["logprob"], 0.0)
            self.assertTrue(all(isinstance(b, int) and 0 <= b < 256 for b in e["bytes"]), e)
            alts = e["top_logprobs"]
            self.assertEqual(len(alts), top)
            values = [a["logprob"] for a in alts]
            self.assertEqual(values, sorted(values, reverse=True))
            # Greedy: the chosen token is the most likely one.
            self.assertEqual((alts[0]["token"], alts[0]["logprob"]), (e["token"], e["logprob"]))

    def test_logprobs(self):
        status, full = self.s.json("POST", "/v1/chat/completions",
                                   chat(logprobs=True, top_logprobs=3))
        self.assertEqual(status, 200, full)
        entries = full["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(entries), full["usage"]["completion_tokens"])
        self.check_chat_logprobs(entries, 3)
        # Every generated token has an entry: the bytes rebuild what the model wrote, reasoning
        # and content included.
        msg = full["choices"][0]["message"]
        text = bytes(b for e in entries for b in e["bytes"]).decode("utf-8", "replace")
        for part in (msg["reasoning_content"], msg["content"]):
            if part:
                self.assertIn(part, text)
        # The stream carries the same entries, each with a chunk.
        status, _, lines = self.s.stream_lines(
            "/v1/chat/completions", chat(logprobs=True, top_logprobs=3, stream=True))
        streamed = []
        for ev in parse_sse(lines):
            lp = ev["choices"][0]["logprobs"]
            if lp is not None:
                streamed += lp["content"]
        self.assertEqual(streamed, entries)
        status, plain = self.s.json("POST", "/v1/chat/completions", chat())
        self.assertIsNone(plain["choices"][0]["logprobs"])

        body = {"prompt": "Hello,", "max_tokens": 10, "temperature": 0, "logprobs": 2}
        status, full = self.s.json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, full)
        lp = full["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), 10)
        self.assertEqual(len(lp["token_logprobs"]), 10)
        self.assertEqual(lp["text_offset"][0], 0)
        for i, tok in enumerate(lp["tokens"]):
            top = lp["top_logprobs"][i]
            self.assertIn(tok, top)  # the chosen token, then the 2 alternatives
            self.assertLessEqual(len(top), 3)
            self.assertEqual(top[tok], lp["token_logprobs"][i])
            self.assertEqual(max(top.values()), lp["token_logprobs"][i])  # greedy
            if i + 1 < len(lp["tokens"]):
                self.assertEqual(lp["text_offset"][i + 1] - lp["text_offset"][i], len(tok))
        status, _, lines = self.s.stream_lines("/v1/completions", dict(body, stream=True))
        merged = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for ev in parse_sse(lines):
            if ev["choices"][0]["logprobs"]:
                for k in merged:
                    merged[k] += ev["choices"][0]["logprobs"][k]
        self.assertEqual(merged, lp)
        status, zero = self.s.json("POST", "/v1/completions", dict(body, logprobs=0))
        self.assertEqual(zero["choices"][0]["logprobs"]["token_logprobs"], lp["token_logprobs"])
        self.assertEqual(zero["choices"][0]["logprobs"]["top_logprobs"], [None] * 10)
        status, err = self.s.json("POST", "/v1/completions", dict(body, logprobs=21))
        self.assertError(status, err, 400, "invalid_request_error", "logprobs")
        # echo + logprobs (lm-eval's loglikelihood request): the prompt's tokens lead, the first
        # without a value, then the generated ones; the stream sends the same.
        echo = {"prompt": "Hello, world", "max_tokens": 3, "temperature": 0, "logprobs": 1,
                "echo": True}
        status, full = self.s.json("POST", "/v1/completions", echo)
        self.assertEqual(status, 200, full)
        lp = full["choices"][0]["logprobs"]
        n_prompt = full["usage"]["prompt_tokens"]
        self.assertEqual(len(lp["tokens"]), n_prompt + 3)
        self.assertIsNone(lp["token_logprobs"][0])
        self.assertIsNone(lp["top_logprobs"][0])
        self.assertTrue(all(x <= 0 for x in lp["token_logprobs"][1:]))
        self.assertTrue(all(len(t) >= 1 for t in lp["top_logprobs"][1:]))
        self.assertTrue(full["choices"][0]["text"].startswith("Hello, world"))
        self.assertEqual(lp["text_offset"][0], 0)
        status, _, lines = self.s.stream_lines("/v1/completions", dict(echo, stream=True))
        merged = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        text = ""
        for ev in parse_sse(lines):
            text += ev["choices"][0]["text"]
            if ev["choices"][0]["logprobs"]:
                for k in merged:
                    merged[k] += ev["choices"][0]["logprobs"][k]
        self.assertEqual(merged, lp)
        self.assertEqual(text, full["choices"][0]["text"])

    def token_id(self, text, special=False):
        status, tok = self.s.json("POST", "/tokenize", {"prompt": text,
                                                        "add_special_tokens": special})
        self.assertEqual(status, 200, tok)
        self.assertEqual(len(tok["tokens"]), 1, tok)
        return tok["tokens"][0]

    def test_response_format_json(self):
        # +100 on "{" and "}" makes the (random) model open and close the object as soon as the
        # grammar allows each (a merged token such as '{"' is then never the first choice): the
        # answer is "{}" and the turn ends, stream or not, with or without reasoning (+100 on
        # </think> ends the reasoning at once).
        bias = {str(self.token_id("{")): 100, str(self.token_id("}")): 100}
        think_end = str(self.token_id("</think>", special=True))
        for fmt in ({"type": "json_object"},
                    {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                        "type": "object"}}}):
            for extra in ({"reasoning_effort": "none"},
                          {"logit_bias": dict(bias, **{think_end: 100})}):
                body = chat(response_format=fmt, max_tokens=40, logit_bias=bias)
                body.update(extra)
                with self.subTest(fmt=fmt["type"], extra=extra):
                    status, full = self.s.json("POST", "/v1/chat/completions", body)
                    self.assertEqual(status, 200, full)
                    choice = full["choices"][0]
                    self.assertEqual(choice["finish_reason"], "stop", (choice, full["usage"]))
                    self.assertEqual(json.loads(choice["message"]["content"]), {})
                    status, _, lines = self.s.stream_lines("/v1/chat/completions",
                                                           dict(body, stream=True))
                    content = "".join(e["choices"][0]["delta"].get("content", "")
                                      for e in parse_sse(lines) if e["choices"])
                    self.assertEqual(content, choice["message"]["content"])
        # min_tokens beyond the object: once "{}" closes, the grammar allows only the end of
        # turn, which min_tokens bans; the constraint wins (the request failed with "no token
        # left" before).
        status, full = self.s.json("POST", "/v1/chat/completions",
                                   chat(response_format={"type": "json_object"}, max_tokens=40,
                                        min_tokens=30, logit_bias=bias,
                                        reasoning_effort="none"))
        self.assertEqual(status, 200, full)
        self.assertEqual(full["choices"][0]["finish_reason"], "stop", full)
        self.assertEqual(json.loads(full["choices"][0]["message"]["content"]), {})
        self.assertLess(full["usage"]["completion_tokens"], 30, full)  # ended at "{}", not later
        # A schema inside the enforced subset: the keys, the integer and the enum hold even for
        # the random model. +100 on "," and "}" takes each as soon as the schema allows it, so
        # the object is short: {"a": <digits>, "b": "x" or "y"} in some key order.
        comma = str(self.token_id(","))
        schema = {"type": "object", "required": ["a", "b"], "additionalProperties": False,
                  "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}}}
        body = chat(response_format={"type": "json_schema",
                                     "json_schema": {"name": "s", "schema": schema}},
                    max_tokens=60, reasoning_effort="none", logit_bias=dict(bias, **{comma: 100}))
        status, full = self.s.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, full)
        choice = full["choices"][0]
        self.assertEqual(choice["finish_reason"], "stop", (choice, full["usage"]))
        obj = json.loads(choice["message"]["content"])
        self.assertEqual(sorted(obj), ["a", "b"], obj)
        self.assertIsInstance(obj["a"], int)
        self.assertIn(obj["b"], ("x", "y"))
        # /v1/completions takes response_format too: the text after the prompt is the object.
        comp = {"prompt": "Answer in JSON:", "max_tokens": 60, "logit_bias": body["logit_bias"],
                "response_format": body["response_format"]}
        status, full = self.s.json("POST", "/v1/completions", comp)
        self.assertEqual(status, 200, full)
        self.assertEqual(full["choices"][0]["finish_reason"], "stop", full)
        obj = json.loads(full["choices"][0]["text"])
        self.assertEqual(sorted(obj), ["a", "b"], obj)
        self.assertIsInstance(obj["a"], int)
        status, err = self.s.json("POST", "/v1/completions",
                                  dict(comp, response_format={"type": "yaml"}))
        self.assertEqual(status, 400, err)
        self.assertIn("response_format.type", err["error"]["message"])
        # Outside the subset ("pattern"): the syntax is still enforced, the request still served.
        schema["properties"]["b"] = {"type": "string", "pattern": "^[xy]$"}
        status, full = self.s.json("POST", "/v1/chat/completions", dict(body, response_format={
            "type": "json_schema", "json_schema": {"name": "s", "schema": schema}}))
        self.assertEqual(status, 200, full)
        text = full["choices"][0]["message"]["content"].lstrip()
        self.assertTrue(text.startswith("{"), text)
        # Without the bias the random model writes some object (maybe cut by max_tokens): what
        # it wrote starts one.
        status, full = self.s.json("POST", "/v1/chat/completions",
                                   chat(response_format={"type": "json_object"}, max_tokens=30,
                                        reasoning_effort="none"))
        self.assertEqual(status, 200, full)
        text = full["choices"][0]["message"]["content"].lstrip()
        self.assertTrue(text.startswith("{"), text)
        if full["choices"][0]["finish_reason"] == "stop":
            self.assertIsInstance(json.loads(text), dict)

    # --- malformed input ----------------------------------------------------------------
    def test_bad_requests(self):
        cases = [
            (b"{not json", 400, "body"),
            (b"[1,2]", 400, "body"),
            (chat(messages="hi"), 400, "messages"),
            (chat(messages=[{"role": "wizard", "content": "x"}]), 400, "messages[0].role"),
            (chat(messages=[]), 400, "messages"),
            (chat(n=2), 400, "n"),
            (chat(temperature="hot"), 400, "temperature"),
            (chat(max_tokens=0), 400, "max_tokens"),
            (chat(max_tokens=1.5), 400, "max_tokens"),
            (chat(stop=[""]), 400, "stop[0]"),
            (chat(stream="yes"), 400, "stream"),
            (chat(logit_bias={"x": 1}), 400, "logit_bias.x"),
            (chat(logit_bias={"100000": 1}), 400, "logit_bias.100000"),
            (chat(reasoning_effort="enormous"), 400, None),
            (chat(tools=[{"type": "function", "function": {"name": "f"}}],
                  tool_choice={"type": "function", "function": {"name": "g"}}), 400, None),
            (chat(top_logprobs=2), 400, "top_logprobs"),  # needs logprobs: true
            (chat(logprobs=True, top_logprobs=21), 400, "top_logprobs"),
            (chat(logprobs="yes"), 400, "logprobs"),
            (chat(min_tokens=-1), 400, "min_tokens"),
            (chat(min_tokens=5, max_tokens=3), 400, "min_tokens"),
            (chat(top_p=0), 400, "top_p"),  # SamplerParams' own check, param filled
            (chat(top_k=4294967297), 400, "top_k"),  # was wrapped to 1 and accepted
            (chat(top_k=2147483648), 400, "top_k"),
        ]
        for body, code, param in cases:
            with self.subTest(body=body):
                status, _, data = self.s.request("POST", "/v1/chat/completions", body)
                self.assertError(status, json.loads(data), code, "invalid_request_error", param)
        status, body = self.s.json("POST", "/v1/chat/completions", chat(model="gpt-4"))
        self.assertError(status, body, 404, param="model")
        status, body = self.s.json("POST", "/v1/completions", {"prompt": 5})
        self.assertError(status, body, 400, param="prompt")

    def test_unknown_fields_ignored(self):
        status, body = self.s.json("POST", "/v1/chat/completions",
                                   chat(store=False, prompt_cache_key="x", user="u",
                                        parallel_tool_calls=True, metadata={"a": 1}))
        self.assertEqual(status, 200, body)

    def test_context_overflow(self):
        long_text = " ".join(f"word{i}" for i in range(600))
        status, body = self.s.json("POST", "/v1/chat/completions",
                                   chat(messages=[{"role": "user", "content": long_text}]))
        self.assertError(status, body, 400, param="messages")
        self.assertIn("512", body["error"]["message"])
        # Clamped by default: a huge max_tokens still works.
        status, body = self.s.json("POST", "/v1/chat/completions", chat(max_tokens=100000))
        self.assertEqual(status, 200, body)

    def test_body_limit(self):
        big = chat(messages=[{"role": "user", "content": "x" * 70000}])
        status, _, data = self.s.request("POST", "/v1/chat/completions", big)
        self.assertError(status, json.loads(data), 413)

    def test_images(self):
        def img(url):
            return chat(messages=[{"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": url}}]}])
        status, body = self.s.json("POST", "/v1/chat/completions", img(png(64, 48)))
        # tiny8 declares a vision_config but ships no tower: refused before any decoding.
        self.assertError(status, body, 400, param="messages[0].content[1].image_url")
        self.assertIn("no usable vision tower", body["error"]["message"])
        self.assertIn("64x48", body["error"]["message"])
        status, body = self.s.json("POST", "/v1/chat/completions",
                                   img("https://example.com/cat.png"))
        self.assertError(status, body, 400)
        self.assertIn("remote", body["error"]["message"])
        status, body = self.s.json("POST", "/v1/chat/completions", img(png(100000, 100000)))
        self.assertError(status, body, 400)
        self.assertIn("exceeds the limit", body["error"]["message"])
        status, body = self.s.json("POST", "/v1/chat/completions",
                                   img("data:image/png;base64,!!!!"))
        self.assertError(status, body, 400)

    # --- concurrency, disconnect, metrics -----------------------------------------------
    def test_concurrency(self):
        results = []

        def worker(i):
            stream = i % 2 == 0
            status, _, data = self.s.request("POST", "/v1/chat/completions",
                                             chat(stream=stream, max_tokens=6))
            if stream:
                parse_sse(data.decode().split("\n"))
            results.append(status)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(7)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [200] * 7)

    def test_concurrency_keep_alive_more_clients_than_sequences(self):
        # 6 clients x 4 requests on reused connections, 2 engine sequences: every request is
        # answered (none lost or parked) within a bounded time.
        body = chat(temperature=0.8, seed=11, max_tokens=5)
        results, errors = [], []

        def worker(i):
            try:
                conn = self.s.connect(timeout=60)
                for j in range(4):
                    stream = (i + j) % 3 == 0
                    conn.request("POST", "/v1/chat/completions",
                                 body=json.dumps(dict(body, stream=stream)),
                                 headers=self.s.headers())
                    r = conn.getresponse()
                    data = r.read()
                    if stream:
                        parse_sse(data.decode().split("\n"))
                    else:
                        json.loads(data)
                    results.append(r.status)
                conn.close()
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(f"client {i}: {e!r}")

        start = time.time()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertFalse(any(t.is_alive() for t in threads), "a client never got its answer")
        self.assertEqual(errors, [])
        self.assertEqual(results, [200] * 24)
        self.assertLess(time.time() - start, 120)

    def test_disconnect_cancels(self):
        sock = socket.create_connection(("127.0.0.1", self.s.port))
        body = json.dumps(chat(stream=True, max_tokens=100000, ignore_eos=True)).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + KEY.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while b"data: " not in got:
            got += sock.recv(4096)
        self.assertIn(b"200 OK", got)
        time.sleep(0.2)
        sock.close()
        deadline = time.time() + 60
        while True:
            _, _, text = self.s.request("GET", "/metrics")
            text = text.decode()
            running = metric(text, "vllm:num_requests_running")
            waiting = metric(text, "vllm:num_requests_waiting")
            if running == 0 and waiting == 0:
                break
            self.assertLess(time.time(), deadline, "disconnected request still running")
            time.sleep(0.05)
        self.assertGreaterEqual(aborted_total(text), 1)

    def test_metrics(self):
        self.s.json("POST", "/v1/chat/completions", chat())
        status, headers, data = self.s.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain"))
        text = data.decode()
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                     "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total",
                     "vllm:generation_tokens_total", "vllm:prefix_cache_queries_total",
                     "vllm:prefix_cache_hits_total"):
            metric(text, name)
        self.assertGreater(metric(text, "vllm:prompt_tokens_total"), 0)
        self.assertGreater(metric(text, "vllm:generation_tokens_total"), 0)
        self.assertGreater(metric(text, "vllm:time_to_first_token_seconds_count"), 0)
        self.assertGreater(metric(text, "vllm:inter_token_latency_seconds_count"), 0)
        self.assertIn('model_name="deepseek-v4.1-flash"', text)

    def raw(self, data, until=b"\r\n\r\n", timeout=60):
        """Sends `data` on a new socket; returns (socket, bytes read until `until` appears)."""
        sock = socket.create_connection(("127.0.0.1", self.s.port), timeout=timeout)
        sock.sendall(data)
        got = b""
        while until not in got:
            part = sock.recv(65536)
            if not part:
                break
            got += part
        return sock, got

    def post_bytes(self, body, extra_headers=b""):
        return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                KEY.encode() + b"\r\nContent-Type: application/json\r\n" + extra_headers +
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    def test_host_date_and_absolute_form(self):
        # RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is a 400; HTTP/1.0 needs
        # none. §3.2.2: the absolute form names the same resource. RFC 9110 §6.6.1: Date.
        for head in (b"GET /health HTTP/1.1\r\n", b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n"):
            sock, got = self.raw(head + b"\r\n", until=b"}")
            sock.close()
            self.assertTrue(got.startswith(b"HTTP/1.1 400"), got)
            self.assertIn(b"exactly one Host header", got)
        sock, got = self.raw(b"GET /health HTTP/1.0\r\n\r\n", until=b"}")
        sock.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got)
        sock, got = self.raw(b"GET http://x:8000/health HTTP/1.1\r\nHost: x:8000\r\n"
                             b"Connection: close\r\n\r\n", until=b"}")
        sock.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got)
        self.assertRegex(got, rb"\r\nDate: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} "
                              rb"\d{4} \d\d:\d\d:\d\d GMT\r\n")

    def test_bytes_after_a_non_stream_request_keep_the_response(self):
        # A stray CRLF (or a pipelined request) after a non-stream request: the response used to
        # be dropped with a reset, and the generation kept running for nobody.
        body = json.dumps(chat(max_tokens=4)).encode()
        pipelined = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 400 + b"\r\n\r\n"
        sock, got = self.raw(self.post_bytes(body) + b"\r\n" + pipelined, until=b'"status"')
        self.assertIn(b"HTTP/1.1 200 OK", got)
        self.assertIn(b'"chat.completion"', got)
        while got.count(b"HTTP/1.1 200") < 2:  # the pipelined /health answered too
            part = sock.recv(65536)
            self.assertTrue(part, got)
            got += part
        sock.close()

    def test_client_leaving_after_a_late_byte_cancels_the_generation(self):
        # A non-stream request, a stray CRLF in a later segment, then the client leaves: the
        # generation used to run on (the disconnect watch ended at the byte) with the socket in
        # CLOSE_WAIT.
        _, _, before = self.s.request("GET", "/metrics")
        aborts0 = aborted_total(before.decode())
        body = json.dumps(chat(max_tokens=100000, ignore_eos=True)).encode()
        sock = socket.create_connection(("127.0.0.1", self.s.port))
        sock.sendall(self.post_bytes(body))
        time.sleep(0.5)
        sock.sendall(b"\r\n")
        time.sleep(0.2)
        sock.close()
        deadline = time.time() + 30
        while True:
            _, _, text = self.s.request("GET", "/metrics")
            text = text.decode()
            if (metric(text, "vllm:num_requests_running") == 0
                    and aborted_total(text) > aborts0):
                break
            self.assertLess(time.time(), deadline, "the generation outlived its client")
            time.sleep(0.1)

    def test_head_then_an_error_keeps_the_error_body(self):
        # reject() answers before dispatch(): the previous request's HEAD must not strip it.
        sock, got = self.raw(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
                             b"BAD LINE\r\n\r\n", until=b"}}")
        sock.close()
        self.assertIn(b"HTTP/1.1 400", got)
        self.assertTrue(got.endswith(b"}}"), got)  # the 400's JSON body arrived

    def test_expect_100_continue_is_answered(self):
        body = json.dumps(chat(max_tokens=1)).encode()
        head = self.post_bytes(body, b"Expect: 100-continue\r\n")
        head = head[: len(head) - len(body)]
        sock, got = self.raw(head, timeout=5)  # before the body: the interim response only
        self.assertTrue(got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), got)
        sock.sendall(body)
        while b'"chat.completion"' not in got:
            part = sock.recv(65536)
            self.assertTrue(part, got)
            got += part
        self.assertIn(b"HTTP/1.1 200 OK", got)
        sock.close()
        # Not to an HTTP/1.0 client (RFC 9110 §10.1.1: no 1xx to 1.0).
        req = self.post_bytes(body, b"Expect: 100-continue\r\n").replace(b"HTTP/1.1", b"HTTP/1.0", 1)
        sock, got = self.raw(req, until=b'"chat.completion"')
        sock.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 200 OK"), got[:60])

    def test_crlf_split_across_segments_before_a_request(self):
        sock = socket.create_connection(("127.0.0.1", self.s.port), timeout=30)
        sock.sendall(b"\r")
        time.sleep(0.2)
        sock.sendall(b"\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"}" not in got:
            part = sock.recv(4096)
            if not part:
                break
            got += part
        sock.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 200 OK"), got)

    def test_head_has_no_body_and_health_stays_open(self):
        sock, got = self.raw(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
                             b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", until=b"}")
        sock.close()
        first, rest = got.split(b"\r\n\r\n", 1)
        self.assertIn(b"HTTP/1.1 200 OK", first)  # open like GET /health, not 401
        self.assertIn(b"Content-Length:", first)
        self.assertTrue(rest.startswith(b"HTTP/1.1 200 OK"), rest)  # no HEAD body before it
        sock, got = self.raw(b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                             until=b"\x00")
        sock.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 401"), got)
        self.assertTrue(got.endswith(b"\r\n\r\n"), got)  # headers only

    def test_malformed_chunked_body_gets_400(self):
        sock, got = self.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                             b"Authorization: Bearer " + KEY.encode() + b"\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
                             until=b"}")
        sock.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 400"), got)
        self.assertIn(b"malformed HTTP request body", got)

    def test_http10_stream_is_not_chunked(self):
        # RFC 9112 §6.1: no Transfer-Encoding to an HTTP/1.0 client; the close ends the body.
        body = json.dumps(chat(stream=True, max_tokens=3)).encode()
        req = self.post_bytes(body).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
        sock, got = self.raw(req, until=b"\x00")  # read until the server closes
        sock.close()
        head, _, rest = got.partition(b"\r\n\r\n")
        self.assertIn(b"200 OK", head)
        self.assertNotIn(b"chunked", head.lower())
        self.assertTrue(rest.startswith(b"data: {"), rest[:80])
        self.assertTrue(rest.rstrip().endswith(b"data: [DONE]"), rest[-80:])

    def test_keep_alive_connection_reuse(self):
        conn = self.s.connect()
        for _ in range(3):
            conn.request("GET", "/v1/models", headers=self.s.headers())
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            r.read()
        conn.close()


class SpeculativeTest(unittest.TestCase):
    def test_speculative_tokens_keep_the_output(self):
        """--speculative-tokens 5: the same greedy text as without, and vLLM's spec counters."""
        prompt = "Hello, who are you? " * 6
        # Bias on three token ids and a frequency penalty make the output cycle, so prompt
        # lookup's drafts get accepted.
        body = {"model": "deepseek-v4.1-flash", "prompt": prompt, "max_tokens": 24,
                "temperature": 0, "ignore_eos": True, "frequency_penalty": 2.0,
                "logit_bias": {"10": 50, "20": 50, "30": 50}}
        texts = []
        for flags in ((), ("--speculative-tokens", "5")):
            s = Server(BINARY, MODEL, *flags, key=KEY)
            try:
                status, full = s.json("POST", "/v1/completions", body)
                self.assertEqual(status, 200, full)
                self.assertEqual(full["usage"]["completion_tokens"], 24)
                streamed = dict(body, stream=True)
                status, _, lines = s.stream_lines("/v1/completions", streamed)
                self.assertEqual("".join(e["choices"][0]["text"] for e in parse_sse(lines)),
                                 full["choices"][0]["text"])
                texts.append(full["choices"][0]["text"])
                status, _, data = s.request("GET", "/metrics")
                text = data.decode()
                drafted = metric(text, "vllm:spec_decode_num_draft_tokens_total")
                accepted = metric(text, "vllm:spec_decode_num_accepted_tokens_total")
                self.assertLessEqual(accepted, drafted)
                if not flags:
                    self.assertEqual(drafted, 0)
                else:
                    self.assertGreater(accepted, 0)
            finally:
                self.assertEqual(s.stop(), 0, "".join(s.log))
        self.assertEqual(texts[0], texts[1])

    def test_dspark_without_a_draft_module_is_refused_by_name(self):
        """--speculative-method dspark loads mtp.*; tiny8 has none: exit 1 naming the key."""
        import subprocess
        proc = subprocess.run([BINARY, "--model", MODEL, "--port", "0", "--host", "127.0.0.1",
                               "--api-key", KEY, "--threads", "1", "--speculative-tokens", "5",
                               "--speculative-method", "dspark"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("num_nextn_predict_layers = 0", proc.stderr)


class TimeoutTest(unittest.TestCase):
    def test_read_timeout_covers_the_header_idle_only_the_wait(self):
        # --read-timeout-s 2, --idle-timeout-s 5: a header trickled a byte per 0.3 s is cut at
        # ~2 s from its first byte (the idle timer covered the header: ~5 s); a connection that
        # sends nothing stays open for the idle timeout.
        s = Server(BINARY, MODEL, "--read-timeout-s", "2", "--idle-timeout-s", "5")
        try:
            def closed_after(trickle):
                sock = socket.create_connection(("127.0.0.1", s.port))
                sock.settimeout(0.3)
                t0 = time.time()
                header = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
                i = 0
                try:
                    while time.time() - t0 < 15:
                        if trickle and i < len(header):
                            sock.sendall(header[i:i + 1])
                            i += 1
                        try:
                            if sock.recv(4096) == b"":
                                return time.time() - t0
                        except socket.timeout:
                            pass
                except (BrokenPipeError, ConnectionResetError):
                    return time.time() - t0
                finally:
                    sock.close()
                return None
            trickled = closed_after(True)
            self.assertIsNotNone(trickled)
            self.assertLess(trickled, 3.5, f"closed after {trickled:.1f} s")
            waited = closed_after(False)
            self.assertIsNotNone(waited)
            self.assertGreater(waited, 4.0, f"an idle connection closed after {waited:.1f} s")
        finally:
            s.stop()


class DescriptorExhaustionTest(unittest.TestCase):
    def test_accept_loop_waits_when_descriptors_run_out(self):
        # More idle connections than descriptors (RLIMIT_NOFILE lowered to 64 on the running
        # server, --max-connections above it): accept fails with EMFILE and must retry after a
        # pause, not spin a core until a connection closes.
        import resource
        s = Server(BINARY, MODEL, "--max-connections", "500")
        socks = []
        try:
            resource.prlimit(s.proc.pid, resource.RLIMIT_NOFILE, (64, 64))
            for _ in range(80):
                socks.append(socket.create_connection(("127.0.0.1", s.port)))

            def cpu_s():
                with open(f"/proc/{s.proc.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            time.sleep(0.5)
            before = cpu_s()
            time.sleep(2.0)
            used = cpu_s() - before
            self.assertLess(used, 0.5, f"{used:.2f} s of CPU in 2 s with descriptors exhausted")
            for c in socks:
                c.close()
            socks = []
            deadline = time.time() + 30
            status = None
            while time.time() < deadline and status != 200:
                try:
                    status, _, _ = s.request("GET", "/health", auth=False)
                except OSError:
                    time.sleep(0.2)
            self.assertEqual(status, 200, "the server accepts again once descriptors are free")
        finally:
            for c in socks:
                c.close()
            s.stop()


class KeyFileAndShutdownTest(unittest.TestCase):
    def test_generated_key_file_and_sigterm(self):
        import os
        import stat
        s = Server(BINARY, MODEL, key=None)
        try:
            path = os.path.join(s.tmp.name, "key")
            mode = stat.S_IMODE(os.stat(path).st_mode)
            self.assertEqual(mode, 0o600)
            with open(path) as f:
                key = f.read().strip()
            self.assertEqual(len(key), 64)
            s.key = key
            status, _ = s.json("GET", "/v1/models")
            self.assertEqual(status, 200)
            # SIGTERM with a stream in flight: the stream ends (error event), the process exits 0.
            sock = socket.create_connection(("127.0.0.1", s.port))
            body = json.dumps(chat(stream=True, max_tokens=100000, ignore_eos=True)).encode()
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Authorization: Bearer " + key.encode() + b"\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            got = b""
            while b"data: " not in got:
                got += sock.recv(4096)
            s.proc.send_signal(15)
            sock.settimeout(120)
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
            sock.close()
            self.assertIn(b'"error"', got)
            self.assertEqual(s.proc.wait(timeout=60), 0, "".join(s.log))
        finally:
            s.stop()


if __name__ == "__main__":
    BINARY, MODEL = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])
