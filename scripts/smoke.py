#!/usr/bin/env python3
"""Smoke test of a running OpenAI-compatible server (stdlib only).

    scripts/smoke.py URL [--key KEY | --key-file FILE] [--model NAME] [--allow-no-vision]

Key: --key, --key-file, env DSV41_API_KEY, else the first line of ~/.dsv41-two-sparks/api_key
(what scripts/launch.sh creates), as scripts/bench.py takes it.
Checks: /health, /v1/models, a non-stream and a streamed chat completion (text), a request with
tools and tool_choice "required" (constrained decoding: finish_reason tool_calls, a get_weather
call with id and JSON-object arguments), and a two-colour PNG image part (answered 200; with
--allow-no-vision also a 400 with a message, for a model without a vision tower such as the bundled
tiny one). Prints one PASS/FAIL line per check; exit code 1 if any failed, 2 for bad arguments.
"""
import argparse
import base64
import json
import os
import struct
import sys
import urllib.error
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import api_key  # noqa: E402  (scripts/lib/api_key.py, shared with bench.py)


def two_colour_png(w, h):
    """A valid 8-bit RGB PNG: left half red, right half blue."""
    row = b"\0" + b"".join(b"\xff\x00\x00" if x < w // 2 else b"\x00\x00\xff" for x in range(w))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(row * h)) + chunk(b"IEND", b""))


def call(url, key, method, path, body=None):
    req = urllib.request.Request(url.rstrip("/") + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:  # nothing listening, reset, timeout
        return 0, f"cannot reach {url}: {getattr(e, 'reason', e)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--key")
    ap.add_argument("--key-file")
    ap.add_argument("--model", default="deepseek-v4.1-flash")
    ap.add_argument("--allow-no-vision", action="store_true",
                    help="a 400 naming why images cannot be used passes the image check")
    a = ap.parse_args()
    try:
        key, source = api_key.resolve(a.key, a.key_file)
    except OSError as e:
        ap.error(f"cannot read the key file: {e}")
    failures = 0

    def check(name, ok, detail=""):
        nonlocal failures
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail[:300]))
        failures += 0 if ok else 1

    status, body = call(a.url, None, "GET", "/health")
    check("health", status == 200, f"{status} {body}")
    status, body = call(a.url, key, "GET", "/v1/models")
    check("models", status == 200 and a.model in body,
          f"{status} {body}" + (f" ({source})" if key is None and status == 401 else ""))
    base = {"model": a.model, "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "user", "content": "Say hello."}]}
    status, body = call(a.url, key, "POST", "/v1/chat/completions", base)
    ok = status == 200 and json.loads(body)["choices"][0]["finish_reason"] in ("stop", "length")
    check("chat text", ok, f"{status} {body}")
    status, body = call(a.url, key, "POST", "/v1/chat/completions", dict(base, stream=True))
    check("chat stream", status == 200 and body.rstrip().endswith("data: [DONE]"), body)
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    status, body = call(a.url, key, "POST", "/v1/chat/completions",
                        dict(base, tools=tools, tool_choice="required", max_tokens=512,
                             messages=[{"role": "user", "content": "Weather in Paris?"}]))
    ok = status == 200
    if ok:
        # tool_choice required: constrained decoding, so even a tiny random model must call.
        choice = json.loads(body)["choices"][0]
        calls = choice["message"].get("tool_calls") or []
        ok = len(calls) >= 1 and choice["finish_reason"] == "tool_calls"
        for c in calls:
            ok = ok and bool(c["id"]) and c["function"]["name"] == "get_weather" and \
                isinstance(json.loads(c["function"]["arguments"]), dict)
    check("chat tool call (tool_choice required)", ok, body)
    png = two_colour_png(64, 48)
    image = {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(png).decode()}}
    status, body = call(a.url, key, "POST", "/v1/chat/completions",
                        dict(base, messages=[{"role": "user", "content": [
                            {"type": "text", "text": "What is this?"}, image]}]))
    ok = status == 200 or (a.allow_no_vision and status == 400 and
                           bool(json.loads(body)["error"]["message"]))
    check("chat image" + (" (200, or 400 with a message)" if a.allow_no_vision else ""), ok,
          f"{status} {body}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
