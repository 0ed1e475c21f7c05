#!/usr/bin/env python3
"""End-to-end speed benchmark of a running OpenAI-compatible server (stdlib only).

    scripts/bench.py [URL] [--key KEY | --key-file FILE] [--model NAME] [--out FILE.json]
                     [--conc 1 2 ...] [--prompt-tokens 8192 32768 ...] [--decode-tokens N]
                     [--max-tokens N] [--ignore-eos] [--long-context 175000 ...] [--repeats N] [--timeout S]

URL with or without /v1. Key: --key, --key-file, env DSV41_API_KEY, else the first line of
~/.dsv41-two-sparks/api_key when it exists.
Every request is a streamed chat completion (`stream_options: {include_usage,
continuous_usage_stats}`), temperature 0, thinking off (`chat_template_kwargs.thinking: false`).
Times are client-side (arrival of each SSE line): they include HTTP and the first decode step.

Prompts are word salad made of whole shuffled passes over WORDS, so every pass tokenizes to nearly
the same count; two calibration requests (no filler, one pass) give the template overhead and the
tokens per word. Reported sizes are the server's own `usage.prompt_tokens`. Prefix cache: each
request starts with its own random tag and shuffle, so at most the chat template's first tokens
match an earlier prompt (`cached_tokens` is reported as the check).

1. prefill, per --prompt-tokens size, `max_tokens: 1`: ttft = request sent -> first token delta
   (non-empty content / reasoning / tool-call delta; the final chunk if none); tok/s =
   prompt_tokens / ttft; --repeats N takes the median ttft of N requests.
2. decode, per --conc c: c threads stream answers to short prompts asking for an essay of about
   --decode-tokens words (default 1000; a request in the prompt, not a cap), with no
   max_tokens unless --max-tokens ("without output caps": the model runs to its end of sentence;
   a random-weight test model runs to the context limit, so tests pass --max-tokens).
   Per stream: tok/s = (completion_tokens - 1) / (last token delta - first token delta), the
   tokens after the first delta counted exactly from per-chunk usage when the server sends it (a
   delta can hold several tokens), so with c = 1 the aggregate equals the stream's rate.
   Aggregate: window [T0, T1], T0 = the latest first-delta time of the streams, T1 = the earliest
   last-delta time (all c streams decode inside it); tok/s = sum over the streams of the tokens
   that arrived in (T0, T1] / (T1 - T0), a stream's count at time t being the usage
   completion_tokens of its last chunk at or before t (its number of deltas without per-chunk
   usage). Streams that never overlapped (T1 <= T0: the server serialised them) fall back to the
   sum of each stream's tokens after its first delta / (last delta of all - first delta of all),
   marked "span". ITL p50/p90: gaps between consecutive deltas of a stream, pooled over streams.
3. long context, per --long-context size (default 175000, the reference's recall test; a bare
   --long-context runs none): "The secret code is NNNNNN." in the middle of a prompt
   of about that size, the question at the end, max_tokens 64. PASS if the answer contains the
   number, else FAIL; "SKIP (context limit)" when the server answers 400 for the length (its
   message is kept).

Output: a table on stdout; --out FILE writes JSON {"url", "model", "time", "settings", "prefill",
"decode", "long_context"}. Unreachable server, 401 or any other non-200: one line on stderr naming
the request and the server's message, exit 1 (the tables measured so far are still printed).
Bad arguments: exit 2.
"""
import argparse
import datetime
import http.client
import json
import os
import random
import re
import statistics
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import api_key  # noqa: E402  (scripts/lib/api_key.py, shared with smoke.py)

# 96 words (a pass is 8 sentences of 12 words): one pass fits a 512-token test context even with
# the tiny test tokenizer (about 4 tokens a word), and keeps calibration exact per pass.
WORDS = """time year people way day man thing woman life child world school
state family student group country problem hand part place case week company
system program question work government number night point home water room mother
area money story fact month book eye job word business issue side
kind head house service friend father power hour game line member law
car city community name president team minute idea body information parent face
level office door health person art war history party result change morning
reason research girl moment air teacher force education river garden window bridge""".split()
TOPICS = ["the history of the printing press", "how bridges are engineered", "the water cycle",
          "the economics of railways", "the evolution of music notation", "how compilers work",
          "the biology of forests", "the life of a mountain glacier"]
LONG_CTX_MAX_TOKENS = 64
SKIP = "SKIP (context limit)"
SETTINGS = ("conc", "prompt_tokens", "decode_tokens", "max_tokens", "ignore_eos", "long_context",
            "repeats")


class BenchError(Exception):
    """A failure to report as one line (exit 1), never as a traceback; status = HTTP status."""
    def __init__(self, msg, status=None, server_msg=None):
        super().__init__(msg)
        self.status, self.server_msg = status, server_msg


class Client:
    def __init__(self, url, key, key_source, model, timeout):
        if "://" not in url:
            url = "http://" + url
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("URL must look like http://HOST:PORT[/v1]")
        self.https, self.host, self.port = u.scheme == "https", u.hostname, u.port
        path = u.path.rstrip("/")
        self.prefix = path[:-3] if path.endswith("/v1") else path   # routes are added as /v1/...
        self.url = f"{u.scheme}://{u.netloc}{self.prefix}"
        self.key, self.key_source, self.model, self.timeout = key, key_source, model, timeout

    def _conn(self):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def _fail(self, what, status, data):
        try:
            msg = json.loads(data)["error"]["message"]
        except Exception:   # not the OpenAI error shape: show the raw body
            msg = data.decode("utf-8", "replace").strip()[:300] or "(empty body)"
        if status == 401:
            why = f"the API key from {self.key_source} was refused" if self.key else \
                f"no API key given ({self.key_source})"
            raise BenchError(f"{what}: HTTP 401, {why}: {msg}", 401, msg)
        raise BenchError(f"{what}: HTTP {status}: {msg}", status, msg)

    def open(self, what, method, route, body=None):
        """Sends a request; returns (conn, response) on 200, raises BenchError otherwise."""
        conn = self._conn()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.key:
            headers["Authorization"] = "Bearer " + self.key
        try:
            conn.request(method, self.prefix + route,
                         body=json.dumps(body).encode() if body is not None else None,
                         headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                data = resp.read()
                conn.close()
                self._fail(what, resp.status, data)
            return conn, resp
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise BenchError(f"{what}: cannot reach {self.url}: {e or type(e).__name__}")

    def get_json(self, what, route):
        conn, resp = self.open(what, "GET", route)
        try:
            return json.loads(resp.read())
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise BenchError(f"{what}: bad response from {self.url}: {e}")
        finally:
            conn.close()

    def stream(self, what, content, max_tokens=None, status_400=False, ignore_eos=False):
        """One streamed chat completion: {events: [(arrival time, usage completion_tokens or
        None)] of the token deltas, t_end, ttft, text, usage, finish}, or {"error": message} on a
        400 when status_400 (the caller decides whether that is a context-limit skip)."""
        body = {"model": self.model, "messages": [{"role": "user", "content": content}],
                "stream": True, "temperature": 0,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                "chat_template_kwargs": {"thinking": False}}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if ignore_eos:
            body["ignore_eos"] = True  # vLLM's extension: fixed-length decode runs
        t_sent = time.perf_counter()
        try:
            conn, resp = self.open(what, "POST", "/v1/chat/completions", body)
        except BenchError as e:
            if status_400 and e.status == 400:
                return {"error": e.server_msg}
            raise
        r = {"events": [], "t_end": None, "text": [], "usage": None, "finish": None}
        try:
            while True:
                line = resp.readline()
                now = time.perf_counter()
                if not line:
                    raise BenchError(f"{what}: the stream ended without data: [DONE]")
                line = line.decode("utf-8").rstrip("\r\n")
                if not line.startswith("data:"):
                    continue          # blank separators and ": keep-alive" comments
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                if "error" in chunk:
                    err = chunk["error"]
                    raise BenchError(f"{what}: error event in the stream: " +
                                     str(err.get("message", err) if isinstance(err, dict) else err))
                usage = chunk.get("usage")
                if usage:
                    r["usage"] = usage
                for choice in chunk.get("choices") or []:
                    d = choice.get("delta") or {}
                    text = (d.get("content") or "") + (d.get("reasoning_content") or "") + \
                        (d.get("reasoning") or "")
                    if text or d.get("tool_calls"):
                        r["events"].append((now, usage.get("completion_tokens") if usage else None))
                        r["text"].append(text)
                    if choice.get("finish_reason"):
                        r["finish"], r["t_end"] = choice["finish_reason"], now
            r["t_end"] = r["t_end"] or now
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise BenchError(f"{what}: reading the stream from {self.url} failed: {e}")
        except (KeyError, TypeError, AttributeError) as e:   # JSON of an unexpected shape
            raise BenchError(f"{what}: malformed stream chunk from {self.url}: {e!r}")
        finally:
            conn.close()
        if not r["usage"]:
            raise BenchError(f"{what}: no usage chunk in the stream (stream_options.include_usage)")
        r["text"] = "".join(r["text"])
        r["ttft"] = (r["events"][0][0] if r["events"] else r["t_end"]) - t_sent
        return r


def filler(rng, n_words):
    """n_words of salad: whole shuffled passes over WORDS, a period after every 12th word."""
    out = []
    while len(out) < n_words:
        out += rng.sample(WORDS, len(WORDS))   # one shuffled pass
    out = out[:n_words]
    return " ".join(w + "." if i % 12 == 11 else w for i, w in enumerate(out))


def prefill_prompt(rng, n_words):
    tag = "%08x" % rng.getrandbits(32)   # distinct start: defeats a server-side prefix cache
    return f"[run {tag}] Read the notes below, then reply with one word.\n\n{filler(rng, n_words)}"


def needle_prompt(rng, n_words, code):
    tag = "%08x" % rng.getrandbits(32)
    half = n_words // 2
    return (f"[run {tag}] A secret code is hidden in the notes below. Remember it.\n\n"
            f"{filler(rng, half)}\n\nThe secret code is {code}.\n\n{filler(rng, n_words - half)}"
            "\n\nWhat is the secret code? Answer with the number only.")


def rnd(x, n=3):
    return None if x is None else round(x, n)


def after_first(r):
    """Tokens after the first delta: completion_tokens - 1 assumes one token per delta; per-chunk
    usage gives the exact count (a first delta holding two byte tokens of one character, a final
    EOS without a delta)."""
    ev = r["events"]
    if ev and ev[0][1] is not None and ev[-1][1] is not None:
        return ev[-1][1] - ev[0][1]
    return r["usage"]["completion_tokens"] - 1


def stream_stats(r):
    ev = r["events"]
    dt, n = ev[-1][0] - ev[0][0] if ev else 0.0, after_first(r)
    return {"prompt_tokens": r["usage"]["prompt_tokens"],
            "completion_tokens": r["usage"]["completion_tokens"], "finish_reason": r["finish"],
            "ttft_s": rnd(r["ttft"]), "decode_s": rnd(dt),
            "tok_s": rnd(n / dt, 2) if dt > 0 and n > 0 else None}


def tokens_at(r, t):
    """Tokens stream r had received by time t (per-chunk usage, else the count of deltas)."""
    count = 0
    for i, (te, used) in enumerate(r["events"]):
        if te > t:
            break
        count = used if used is not None else i + 1
    return count


def decode_run(client, conc, args, rng):
    prompts = [f"[run {rng.getrandbits(32):08x}] Write a long, detailed essay of about "
               f"{args.decode_tokens} words on {TOPICS[i % len(TOPICS)]}. Cover its history, how "
               "it works, famous examples and open questions." for i in range(conc)]
    results, errors = [None] * conc, []
    barrier = threading.Barrier(conc)

    def worker(i):
        try:
            barrier.wait()
            results[i] = client.stream(f"decode conc={conc} stream {i}", prompts[i],
                                       args.max_tokens, ignore_eos=args.ignore_eos)
        except BenchError as e:
            errors.append(str(e))
        except Exception as e:   # never a traceback from a thread
            errors.append(f"decode conc={conc} stream {i}: {type(e).__name__}: {e}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise BenchError(errors[0])
    streams = [stream_stats(r) for r in results]
    live = [r for r in results if len(r["events"]) >= 2]
    agg, window, span = None, "overlap", 0.0
    if live:
        t_lo = max(r["events"][0][0] for r in live)
        t_hi = min(r["events"][-1][0] for r in live)
        if t_hi > t_lo:
            span = t_hi - t_lo
            agg = sum(tokens_at(r, t_hi) - tokens_at(r, t_lo) for r in live) / span
        else:
            window = "span"
            span = max(r["events"][-1][0] for r in live) - min(r["events"][0][0] for r in live)
            agg = sum(after_first(r) for r in live) / span if span else None
    gaps = [b[0] - a[0] for r in results for a, b in zip(r["events"], r["events"][1:])]
    # deciles, linear interpolation between the closest ranks
    q = statistics.quantiles(gaps, n=10, method="inclusive") if len(gaps) > 1 else gaps * 9
    return {"conc": conc, "streams": streams, "wall_s": rnd(wall),
            "aggregate_tok_s": rnd(agg, 2), "aggregate_window": window,
            "aggregate_window_s": rnd(span),
            "itl_p50_ms": rnd(q[4] * 1e3, 2) if q else None,
            "itl_p90_ms": rnd(q[8] * 1e3, 2) if q else None}


def calibrate(client, rng):
    """(template overhead in tokens, tokens per filler word), from two max_tokens=1 requests."""
    base = client.stream("calibration (no filler)", prefill_prompt(rng, 0), 1)
    one = client.stream("calibration (one pass)", prefill_prompt(rng, len(WORDS)), 1)
    p0, p1 = base["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]
    return p0, max(p1 - p0, 1) / len(WORDS)


def fmt(x, spec=""):
    return "-" if x is None else format(x, spec)


def print_tables(res):
    print(f"server {res['url']}  model {res['model']}  {res['time']}")
    if res["prefill"]:
        print("\nprefill      requested  prompt_tokens  cached   ttft_s     tok/s")
        for p in res["prefill"]:
            print(f"{'':12} {p['requested_tokens']:>9} {p['prompt_tokens']:>14} "
                  f"{p['cached_tokens']:>7} {p['ttft_s']:>8.3f} {p['tok_s']:>9.1f}")
    if res["decode"]:
        print("\ndecode  conc  stream  completion  ttft_s  decode_s    tok/s  finish")
        for d in res["decode"]:
            for i, s in enumerate(d["streams"]):
                print(f"{'':7} {d['conc']:>4} {i:>7} {s['completion_tokens']:>11} "
                      f"{s['ttft_s']:>7.3f} {s['decode_s']:>9.3f} {fmt(s['tok_s']):>8}  "
                      f"{s['finish_reason']}")
            print(f"{'':7} {d['conc']:>4}  aggregate {fmt(d['aggregate_tok_s'])} tok/s "
                  f"({d['aggregate_window']} {d['aggregate_window_s']} s), ITL p50 "
                  f"{fmt(d['itl_p50_ms'])} ms p90 {fmt(d['itl_p90_ms'])} ms, wall {d['wall_s']} s")
    if res["long_context"]:
        print("\nlong context  requested  prompt_tokens   ttft_s  status")
        for c in res["long_context"]:
            print(f"{'':13} {c['requested_tokens']:>9} {fmt(c['prompt_tokens']):>14} "
                  f"{fmt(c['ttft_s'], '.3f'):>8}  {c['status']}" +
                  (f": {c['error']}" if c.get("error") else ""))


def run(client, args, res):
    models = client.get_json("GET /v1/models", "/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    if client.model not in ids:
        raise BenchError(f"model '{client.model}' is not served by {client.url} (it serves "
                         f"{', '.join(map(str, ids)) or 'nothing'}); pass --model")
    rng = random.Random()
    log = lambda msg: print("# " + msg, file=sys.stderr, flush=True)   # noqa: E731
    log("calibrating prompt sizes")
    overhead, tpw = calibrate(client, rng)
    words = lambda target, over: max(0, round((target - over) / tpw))   # noqa: E731
    for size in args.prompt_tokens:
        runs = [client.stream(f"prefill {size} (run {k + 1})",
                              prefill_prompt(rng, words(size, overhead)), 1)
                for k in range(args.repeats)]
        ttft = statistics.median(r["ttft"] for r in runs)
        u = runs[0]["usage"]
        res["prefill"].append({
            "requested_tokens": size, "prompt_tokens": u["prompt_tokens"],
            "cached_tokens": (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0,
            "ttft_s": rnd(ttft), "tok_s": rnd(u["prompt_tokens"] / ttft, 1),
            "runs_ttft_s": [rnd(r["ttft"]) for r in runs]})
        log(f"prefill {size}: {u['prompt_tokens']} tokens in {ttft:.3f} s")
    for conc in args.conc:
        for k in range(args.repeats):
            res["decode"].append(dict(decode_run(client, conc, args, rng), repeat=k + 1))
            log(f"decode conc={conc}: aggregate {res['decode'][-1]['aggregate_tok_s']} tok/s")
    if args.long_context:   # the needle template's own overhead
        lc_over = client.stream("long-context calibration", needle_prompt(rng, 0, "000000"),
                                1)["usage"]["prompt_tokens"]
    for size in args.long_context:
        code = "%06d" % rng.randrange(100000, 10 ** 6)
        r = client.stream(f"long context {size}", needle_prompt(rng, words(size, lc_over), code),
                          LONG_CTX_MAX_TOKENS, status_400=True)
        e = {"requested_tokens": size, "needle": code}
        if "error" not in r:
            e.update(prompt_tokens=r["usage"]["prompt_tokens"], ttft_s=rnd(r["ttft"]),
                     status="PASS" if code in r["text"] else "FAIL", answer=r["text"][:200])
        elif re.search(r"context|too long|maximum|exceed", r["error"], re.I):
            m = re.search(r"(\d+) tokens", r["error"])   # the server's count, when it says it
            e.update(prompt_tokens=int(m.group(1)) if m else None, ttft_s=None, status=SKIP,
                     answer=None, error=r["error"])
        else:
            raise BenchError(f"long context {size}: HTTP 400: {r['error']}")
        res["long_context"].append(e)
        log(f"long context {size}: {e['status']}")


def main():
    ap = argparse.ArgumentParser(description="End-to-end speed benchmark of a running server.")
    ap.add_argument("url", nargs="?", default="http://127.0.0.1:8000",
                    help="server URL, with or without /v1 (default http://127.0.0.1:8000, the "
                         "launcher's rank 0 on this host)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--key", help="API key (default: env DSV41_API_KEY, then "
                                 "~/.dsv41-two-sparks/api_key)")
    g.add_argument("--key-file", help="file whose first line is the API key")
    ap.add_argument("--model", default="deepseek-v4.1-flash")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--conc", type=int, nargs="+", default=[1], help="decode concurrencies")
    ap.add_argument("--prompt-tokens", type=int, nargs="*", default=[8192, 32768],
                    help="prefill prompt sizes (about; the server's count is reported)")
    ap.add_argument("--decode-tokens", type=int, default=1000,
                    help="words the decode prompt asks for (a request in the prompt, not a cap)")
    ap.add_argument("--max-tokens", type=int, help="cap decode streams (default: no cap)")
    ap.add_argument("--ignore-eos", action="store_true",
                    help="decode streams run past end of sequence (with --max-tokens: every "
                         "stream exactly that long)")
    # The reference's long-context status is its 175k-token recall (spec seed.md); a bare
    # --long-context runs none.
    ap.add_argument("--long-context", type=int, nargs="*", default=[175000],
                    help="needle-in-a-haystack prompt sizes (default 175000; none when given "
                         "without sizes)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600, help="socket timeout per read, seconds")
    a = ap.parse_args()
    for name in ("conc", "prompt_tokens", "long_context"):
        if any(v < 1 for v in getattr(a, name)):
            ap.error(f"--{name.replace('_', '-')} values must be >= 1")
    for name in ("decode_tokens", "max_tokens", "repeats", "timeout"):
        if getattr(a, name) is not None and getattr(a, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be > 0")
    if a.out and not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        ap.error(f"--out {a.out}: no such directory")   # fail now, not after a long run
    try:
        key, source = api_key.resolve(a.key, a.key_file)
    except OSError as e:
        ap.error(f"cannot read the key file: {e}")
    try:
        client = Client(a.url, key, source, a.model, a.timeout)
    except ValueError as e:   # includes a bad port number
        ap.error(str(e))
    res = {"url": client.url, "model": client.model,
           "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "settings": dict({k: getattr(a, k) for k in SETTINGS}, thinking=False, temperature=0),
           "prefill": [], "decode": [], "long_context": []}
    try:
        run(client, a, res)
    except (BenchError, KeyboardInterrupt) as e:
        if res["prefill"] or res["decode"] or res["long_context"]:
            print_tables(res)   # what was measured before the failure is still worth showing
        print(f"bench.py: error: {e or 'interrupted'}", file=sys.stderr)
        return 1
    print_tables(res)
    if a.out:
        try:
            with open(a.out, "w") as f:
                f.write(json.dumps(res, indent=2) + "\n")
        except OSError as e:
            print(f"bench.py: error: cannot write {a.out}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
