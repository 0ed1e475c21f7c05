#!/usr/bin/env python3
"""Black-box test of scripts/bench.py against the real dsv41-server on the tiny8 model.

    test_bench.py DSV41_SERVER MODEL_DIR BENCH_PY

--max-context 512 keeps every request tiny (the model is a random-weight CPU model) and makes a
4000-token long-context prompt overflow, so the "SKIP (context limit)" path is exercised. The decode
streams pass --max-tokens: without a cap a random model runs to the context limit.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

BINARY, MODEL, BENCH = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from server_harness import Server  # noqa: E402

KEY = "bench-test-key-42"


def closed_port():
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BenchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(BINARY, MODEL, "--max-context", "512", "--max-sequences", "2", key=KEY)
        cls.url = f"http://127.0.0.1:{cls.s.port}"
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()
        cls.tmp.cleanup()

    def bench(self, *args, env=None, timeout=300):
        # HOME points at an empty directory so ~/.dsv41-two-sparks/api_key of the machine running
        # the test is never read; the key comes from the arguments or from env.
        e = dict(os.environ, HOME=self.tmp.name)
        e.pop("DSV41_API_KEY", None)
        e.update(env or {})
        t = time.time()
        p = subprocess.run([sys.executable, BENCH] + list(args), env=e, capture_output=True,
                           text=True, timeout=timeout)
        self.out = f"exit {p.returncode} after {time.time() - t:.1f} s\n--- stdout\n{p.stdout}" \
                   f"--- stderr\n{p.stderr}"
        return p

    def test_full_run(self):
        out = os.path.join(self.tmp.name, "bench.json")
        # Key from the environment, URL with /v1: both documented entry points.
        p = self.bench(self.url + "/v1", "--prompt-tokens", "64", "200", "--conc", "1", "2",
                       "--ignore-eos",
                       "--max-tokens", "16", "--long-context", "100", "4000", "--out", out,
                       env={"DSV41_API_KEY": KEY})
        self.assertEqual(p.returncode, 0, self.out)
        self.assertNotIn("Traceback", p.stderr, self.out)
        with open(out) as f:
            res = json.load(f)
        for k in ("url", "model", "time", "prefill", "decode", "long_context"):
            self.assertIn(k, res, self.out)
        self.assertEqual(res["model"], "deepseek-v4.1-flash")
        self.assertEqual([p["requested_tokens"] for p in res["prefill"]], [64, 200], self.out)
        for e in res["prefill"]:
            want = e["requested_tokens"]
            self.assertTrue(0.75 * want <= e["prompt_tokens"] <= 1.25 * want, e)
            self.assertGreater(e["ttft_s"], 0, e)
            self.assertGreater(e["tok_s"], 0, e)
            # Distinct prefixes: the server's prefix cache must not serve these prompts.
            self.assertLess(e["cached_tokens"], e["prompt_tokens"] / 2, e)
        self.assertEqual([d["conc"] for d in res["decode"]], [1, 2], self.out)
        for d in res["decode"]:
            self.assertEqual(len(d["streams"]), d["conc"], d)
            for s in d["streams"]:
                # --max-tokens honoured; --ignore-eos: a random model's EOS does not end it early
                self.assertEqual(s["completion_tokens"], 16, s)
                self.assertGreater(s["tok_s"], 0, s)
                self.assertGreater(s["ttft_s"], 0, s)
            for k in ("aggregate_tok_s", "itl_p50_ms", "itl_p90_ms", "wall_s"):
                self.assertGreater(d[k], 0, d)
            self.assertLessEqual(d["itl_p50_ms"], d["itl_p90_ms"], d)
        one = res["decode"][0]   # one stream: the aggregate is that stream's rate
        self.assertAlmostEqual(one["aggregate_tok_s"], one["streams"][0]["tok_s"], delta=0.1)
        lc = {e["requested_tokens"]: e for e in res["long_context"]}
        self.assertIn(lc[100]["status"], ("PASS", "FAIL"), self.out)   # random weights: either
        self.assertGreater(lc[100]["prompt_tokens"], 0)
        self.assertGreater(lc[100]["ttft_s"], 0)
        self.assertEqual(lc[4000]["status"], "SKIP (context limit)", self.out)
        self.assertIn("512", lc[4000]["error"], self.out)   # the server's message is kept
        for word in ("prefill", "decode", "long context", "SKIP (context limit)"):
            self.assertIn(word, p.stdout, self.out)

    def test_wrong_key(self):
        key_file = os.path.join(self.tmp.name, "wrong_key")
        with open(key_file, "w") as f:
            f.write("not-the-key\n")
        p = self.bench(self.url, "--key-file", key_file, "--prompt-tokens", "64",
                       "--max-tokens", "4")
        self.assertEqual(p.returncode, 1, self.out)
        self.assertIn("401", p.stderr, self.out)
        self.assertIn(key_file, p.stderr, self.out)   # says where the key was read from
        self.assertNotIn("Traceback", p.stderr, self.out)
        p = self.bench(self.url, "--prompt-tokens", "64", "--max-tokens", "4")   # no key at all
        self.assertEqual(p.returncode, 1, self.out)
        self.assertIn("key", p.stderr.lower(), self.out)
        self.assertNotIn("Traceback", p.stderr, self.out)

    def test_key_from_home(self):
        # The last fallback: ~/.dsv41-two-sparks/api_key (what the deployment scripts write).
        with tempfile.TemporaryDirectory() as home:
            os.makedirs(os.path.join(home, ".dsv41-two-sparks"))
            with open(os.path.join(home, ".dsv41-two-sparks", "api_key"), "w") as f:
                f.write(KEY + "\n")
            p = self.bench(self.url, "--prompt-tokens", "64", "--max-tokens", "4",
                           env={"HOME": home})
        self.assertEqual(p.returncode, 0, self.out)
        self.assertIn("aggregate", p.stdout, self.out)
        # No --long-context: the seed's command still reports the 175k recall's status (past
        # this server's 512-token context: SKIP with the server's message).
        self.assertRegex(p.stdout, r"175000 .*SKIP \(context limit\)", self.out)

    def test_unreachable(self):
        p = self.bench(f"http://127.0.0.1:{closed_port()}", "--key", KEY, "--timeout", "10")
        self.assertEqual(p.returncode, 1, self.out)
        self.assertIn("cannot reach", p.stderr, self.out)
        self.assertNotIn("Traceback", p.stderr, self.out)
        self.assertEqual(p.stderr.count("\n"), 1, self.out)   # one line

    def test_other_error(self):
        # A 404 (unknown model): the check before any measurement names the served model.
        p = self.bench(self.url, "--key", KEY, "--model", "no-such-model")
        self.assertEqual(p.returncode, 1, self.out)
        self.assertIn("deepseek-v4.1-flash", p.stderr, self.out)
        self.assertNotIn("Traceback", p.stderr, self.out)
        # A prefill prompt over --max-context: 400 with the server's message, exit 1.
        p = self.bench(self.url, "--key", KEY, "--prompt-tokens", "5000", "--conc", "1")
        self.assertEqual(p.returncode, 1, self.out)
        self.assertIn("HTTP 400", p.stderr, self.out)
        self.assertIn("maximum context of 512", p.stderr, self.out)
        self.assertNotIn("Traceback", p.stderr, self.out)

    def test_bad_args(self):
        for args in ([self.url, "--conc", "0"], [self.url, "--conc", "x"],
                     [self.url, "--key", "a", "--key-file", "b"], [self.url, "--repeats", "0"],
                     [self.url, "--key-file", os.path.join(self.tmp.name, "absent")],
                     ["ftp://host/"], [self.url, "--bogus"]):
            p = self.bench(*args)
            self.assertEqual(p.returncode, 2, f"{args}: {self.out}")
            self.assertNotIn("Traceback", p.stderr, self.out)


if __name__ == "__main__":
    t0 = time.time()
    result = unittest.main(argv=sys.argv[:1], verbosity=2, exit=False).result
    print(f"total {time.time() - t0:.1f} s")
    sys.exit(0 if result.wasSuccessful() else 1)
