#!/usr/bin/env python3
"""Two TP rank processes on two "hosts" (docs/tp.md "Rank processes", ctest label tp).

Creates two network namespaces joined by a veth pair (addresses 10.231.N.1/.2 exist only inside
them; removed at the end), or, without the privilege, says so and uses loopback 127.0.0.1/.2.
Then:
  1. dsv41_tp_logits as rank 0 + rank 1 gives the logits of one process (prefill, chunked
     prefill, decode, fork + rollback): max diff printed, <= 2e-3 with the same argmax per row.
  2. dsv41-server rank 0 (HTTP) + rank 1 (--rank 1 --peer, no HTTP) give the same greedy
     completion as a one-process server.
  3. kill -9 of rank 1 mid-stream: the client gets an error within 10 s, /health turns 503 within
     10 s; rank 0 stops on SIGTERM; restarting both serves again; the same with rank 1 frozen
     (SIGSTOP: a stalled link, found by the heartbeat).
  4. ranks started with different --kv-bytes both exit, naming the setting.
  5. (with TINY8_VISION) a chat request with a PNG on tiny8 with a tiny vision tower (the
     dsv41_tiny8_vision fixture writer): rank 0 encodes, the span's rows travel to rank 1 with
     the forward; the same greedy answer as a one-process server.
  6. (with TINY8_DSPARK) both ranks started with --speculative-method dspark on tiny8 with the
     synthetic draft module: each rank holds half of the draft module, rank 0 mirrors every
     draft round; the greedy completion equals a one-process server without speculation, and
     /metrics counts verified drafts.
usage: tp_netns_test.py DSV41_SERVER DSV41_TP_LOGITS MODEL_DIR [TINY8_VISION [TINY8_DSPARK]]
"""
import array
import base64
import ctypes
import http.client
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib

SERVER, LOGITS, MODEL = sys.argv[1:4]
TINY8_VISION = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
TINY8_DSPARK = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
KEY = "tp-test-key-0123456789"
LISTEN_RE = re.compile(r"listening on http://[^:]+:(\d+)")
CLONE_NEWNET = 0x40000000


def ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True)


class Fabric:
    """Two hosts: namespaces + veth, or loopback addresses."""

    def __init__(self):
        tag = f"tp{os.getpid() % 100000}"
        self.ns = [tag + "a", tag + "b"]
        sub = random.randint(1, 250)
        self.addr = [f"10.231.{sub}.1", f"10.231.{sub}.2"]
        steps = [
            ["netns", "add", self.ns[0]], ["netns", "add", self.ns[1]],
            ["link", "add", tag + "va", "type", "veth", "peer", "name", tag + "vb"],
            ["link", "set", tag + "va", "netns", self.ns[0]],
            ["link", "set", tag + "vb", "netns", self.ns[1]],
            ["-n", self.ns[0], "addr", "add", self.addr[0] + "/24", "dev", tag + "va"],
            ["-n", self.ns[1], "addr", "add", self.addr[1] + "/24", "dev", tag + "vb"],
            ["-n", self.ns[0], "link", "set", tag + "va", "up"],
            ["-n", self.ns[1], "link", "set", tag + "vb", "up"],
            ["-n", self.ns[0], "link", "set", "lo", "up"],
            ["-n", self.ns[1], "link", "set", "lo", "up"],
        ]
        self.veth = tag + "va"
        for s in steps:
            r = ip(*s)
            if r.returncode != 0:
                print(f"SKIP network namespaces: 'ip {' '.join(s)}' failed: {r.stderr.strip()}; "
                      "using loopback 127.0.0.1 / 127.0.0.2 instead", flush=True)
                self.cleanup()
                self.ns = None
                self.addr = ["127.0.0.1", "127.0.0.2"]
                return
        # The test's own HTTP client and the rank-0 side live in namespace a from now on.
        fd = os.open(f"/var/run/netns/{self.ns[0]}", os.O_RDONLY)
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        os.close(fd)
        print(f"network namespaces {self.ns[0]} ({self.addr[0]}) <-veth-> {self.ns[1]} "
              f"({self.addr[1]})", flush=True)

    def cmd(self, rank, args):
        return (["ip", "netns", "exec", self.ns[rank]] if self.ns else []) + args

    def cleanup(self):
        if self.ns:
            for n in self.ns:
                ip("netns", "del", n)


class Proc:
    started = []  # every process of the test, killed at the end whatever happened

    def __init__(self, args):
        Proc.started.append(self)
        self.args = args
        self.p = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.log = []
        self.port = None
        self.listening = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stderr:
            self.log.append(line)
            m = LISTEN_RE.search(line)
            if m:
                self.port = int(m.group(1))
                self.listening.set()

    def text(self):
        return "".join(self.log)

    def wait(self, timeout):
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        # The exit can beat the reader thread to the last stderr lines (CI once saw rank 1's
        # mismatch message missing from text() right after wait()); the pipe closes at exit, so
        # the join ends as soon as the thread has read them.
        self.reader.join(10)
        return rc

    def stop(self, sig=15, timeout=30):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.wait(timeout)
        if rc is None:
            self.p.kill()
            self.p.wait()
            raise AssertionError(f"{self.args[0]} did not stop within {timeout} s:\n{self.text()}")
        return rc


def req(port, method, path, body=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=json.dumps(body).encode() if body else None,
                     headers={"Content-Type": "application/json",
                              "Authorization": "Bearer " + KEY})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def wait_healthy(proc, timeout=120):
    assert proc.listening.wait(timeout), "server did not listen:\n" + proc.text()
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.p.poll() is not None:
            raise AssertionError("server exited:\n" + proc.text())
        if req(proc.port, "GET", "/health")[0] == 200:
            return
        time.sleep(0.1)
    raise AssertionError("server never became healthy:\n" + proc.text())


def server_args(extra, model=MODEL):
    return [SERVER, "--model", model, "--host", "127.0.0.1", "--port", "0", "--api-key", KEY,
            "--threads", "1"] + extra


def start_pair(fab, port, rank1_extra=(), model=MODEL, both_extra=(), rank1_env=()):
    env = ["env"] + list(rank1_env) if rank1_env else []  # rank 1's own DSV41_* settings
    r1 = Proc(fab.cmd(1, env + server_args(["--rank", "1", "--peer", f"{fab.addr[0]}:{port}",
                                      "--tp-bind", fab.addr[1], "--tp-heartbeat-timeout-ms",
                                      "2000"] + list(rank1_extra) + list(both_extra), model)))
    r0 = Proc(fab.cmd(0, server_args(["--rank", "0", "--peer", fab.addr[1], "--tp-bind",
                                      fab.addr[0], "--tp-port", str(port),
                                      "--tp-heartbeat-timeout-ms", "2000"] + list(both_extra),
                                     model)))
    return r0, r1


COMPLETION = {"model": "deepseek-v4.1-flash", "prompt": "Hello, who are you?", "max_tokens": 12,
              "temperature": 0}


def test_logits(fab, port):
    ref, out = "/tmp/dsv41_tp_ref_%d.bin" % os.getpid(), "/tmp/dsv41_tp_r0_%d.bin" % os.getpid()
    subprocess.run([LOGITS, MODEL, ref], check=True, capture_output=True)
    r1 = Proc(fab.cmd(1, [LOGITS, MODEL, "/dev/null", "1", fab.addr[1], fab.addr[0], str(port)]))
    r0 = Proc(fab.cmd(0, [LOGITS, MODEL, out, "0", fab.addr[0], fab.addr[1], str(port)]))
    assert r0.wait(300) == 0, "rank 0 failed:\n" + r0.text()
    assert r1.wait(60) == 0, "rank 1 failed:\n" + r1.text()
    a = array.array("f", open(ref, "rb").read())
    b = array.array("f", open(out, "rb").read())
    os.unlink(ref)
    os.unlink(out)
    assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
    V = 600
    diff = max(abs(x - y) for x, y in zip(a, b))
    for r in range(len(a) // V):
        ra, rb = a[r * V:(r + 1) * V], b[r * V:(r + 1) * V]
        assert ra.index(max(ra)) == rb.index(max(rb)), f"argmax differs at row {r}"
    print(f"logits: {len(a) // V} rows, max |TP2 - TP1| = {diff:.3g} (tolerance 2e-3)",
          flush=True)
    assert diff <= 2e-3


def fail_mid_stream(r0, what, action):
    """Starts a long streamed generation on rank 0, runs `action` (breaks rank 1) after a few
    events, and checks: the stream ends with an error within 10 s, /health 503 within 10 s."""
    conn = http.client.HTTPConnection("127.0.0.1", r0.port, timeout=60)
    body = dict(COMPLETION, max_tokens=100000, stream=True, ignore_eos=True)
    conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    resp = conn.getresponse()
    assert resp.status == 200
    for _ in range(6):  # a few events first
        resp.fp.readline()
    action()
    t0 = time.time()
    rest = b""
    while True:
        line = resp.fp.readline()
        if not line:
            break
        rest += line
        if b"[DONE]" in line or b'"error"' in line:
            break
    ended = time.time() - t0
    conn.close()
    print(f"{what}: stream ended after {ended:.2f} s: {rest[-220:]!r}", flush=True)
    assert ended < 10, ended
    assert b"error" in rest, rest[-500:]
    deadline = t0 + 10
    health = body = None
    while time.time() < deadline:
        health, body = req(r0.port, "GET", "/health")
        if health == 503:
            break
        time.sleep(0.1)
    print(f"  /health: {health} {body!r} ({time.time() - t0:.2f} s after)", flush=True)
    assert health == 503
    # The 503 names the lost peer, not "still loading".
    assert b"tensor-parallel peer (rank 1 at" in body, body


def test_server(fab, port):
    one = Proc(fab.cmd(0, server_args([])))
    wait_healthy(one)
    status, body = req(one.port, "POST", "/v1/completions", COMPLETION)
    assert status == 200, body
    want = json.loads(body)["choices"][0]["text"]
    assert one.stop() == 0

    r0, r1 = start_pair(fab, port)
    wait_healthy(r0)
    status, body = req(r0.port, "POST", "/v1/completions", COMPLETION)
    assert status == 200, body
    got = json.loads(body)["choices"][0]["text"]
    print(f"greedy through the server: one process {want!r}, TP pair {got!r}", flush=True)
    assert got == want

    fail_mid_stream(r0, "kill -9 rank 1", lambda: r1.p.kill())
    assert r0.stop() == 0, r0.text()
    r1.wait(5)

    # Restarting both recovers.
    r0, r1 = start_pair(fab, port)
    wait_healthy(r0)
    status, body = req(r0.port, "POST", "/v1/completions", COMPLETION)
    assert status == 200 and json.loads(body)["choices"][0]["text"] == want, body
    assert r0.stop() == 0, r0.text()
    assert r1.wait(20) == 0, "rank 1 did not stop with rank 0:\n" + r1.text()
    print("restart: both ranks serve again; SIGTERM on rank 0 stops rank 1 (exit 0)", flush=True)

    # A stalled link (rank 1 frozen): found by the heartbeat (2 s here).
    r0, r1 = start_pair(fab, port)
    wait_healthy(r0)
    fail_mid_stream(r0, "SIGSTOP rank 1", lambda: r1.p.send_signal(19))
    assert r0.stop() == 0, r0.text()
    r1.p.send_signal(18)
    r1.stop(9)


def expect_both_refuse(label, r0, r1, want):
    """Both ranks exit non-zero and name `want` (the rendezvous compares the same handshake)."""
    rc0, rc1 = r0.wait(60), r1.wait(60)
    print(f"{label}: rank 0 exit {rc0}, rank 1 exit {rc1}", flush=True)
    assert rc0 not in (None, 0) and rc1 not in (None, 0), (r0.text(), r1.text())
    assert want in r0.text(), r0.text()
    assert want in r1.text(), r1.text()
    print("  rank 0: " + [l for l in r0.log if want in l][0].strip(), flush=True)


def test_mismatch(fab, port):
    expect_both_refuse("mismatch", *start_pair(fab, port, ["--kv-bytes", "123456789"]),
                       "TP ranks disagree on setting 'kv_bytes'")
    # RDMA on one rank only: named at the rendezvous (before, the RDMA rank's setup waited for a
    # peer that never joined it, and the timeout did not mention RDMA).
    expect_both_refuse("rdma on rank 1 only",
                       *start_pair(fab, port + 100, rank1_env=["DSV41_TP_IB_DEVICE=mlx5_0"]),
                       "TP ranks disagree on setting 'tp_rdma': rank 0 has '0', rank 1 has '1'")


def png_data_url(w, h):
    raw = b"".join(b"\0" + bytes((x * 37 + y * 11 + c * 5) & 255 for x in range(w)
                                  for c in range(3)) for y in range(h))

    def chunk(t, d):
        return (struct.pack(">I", len(d)) + t + d +
                struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(data).decode()


def test_image(fab, port):
    model = subprocess.run([TINY8_VISION], check=True, capture_output=True,
                           text=True).stdout.strip()
    try:
        chat = {"model": "deepseek-v4.1-flash", "max_tokens": 10, "temperature": 0,
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": png_data_url(20, 14)}}]}]}

        def answer(proc):
            status, body = req(proc.port, "POST", "/v1/chat/completions", chat)
            assert status == 200, body
            r = json.loads(body)
            return r["choices"][0]["message"], r["usage"]["prompt_tokens"]

        one = Proc(fab.cmd(0, server_args([], model)))
        wait_healthy(one)
        want = answer(one)
        assert one.stop() == 0
        r0, r1 = start_pair(fab, port, model=model)
        wait_healthy(r0)
        got = answer(r0)
        print(f"image chat through the server: one process {want!r}, TP pair {got!r}",
              flush=True)
        assert got == want
        assert r0.stop() == 0, r0.text()
        assert r1.wait(20) == 0, "rank 1 did not stop with rank 0:\n" + r1.text()
    finally:
        shutil.rmtree(model, ignore_errors=True)


def test_dspark(fab, port):
    model = subprocess.run([TINY8_DSPARK], check=True, capture_output=True,
                           text=True).stdout.strip()
    try:
        body = dict(COMPLETION, max_tokens=16, ignore_eos=True)
        one = Proc(fab.cmd(0, server_args([], model)))
        wait_healthy(one)
        status, resp = req(one.port, "POST", "/v1/completions", body)
        assert status == 200, resp
        want = json.loads(resp)["choices"][0]["text"]
        assert one.stop() == 0
        dspark = ["--speculative-tokens", "5", "--speculative-method", "dspark"]
        r0, r1 = start_pair(fab, port, model=model, both_extra=dspark)
        wait_healthy(r0)
        status, resp = req(r0.port, "POST", "/v1/completions", body)
        assert status == 200, resp
        got = json.loads(resp)["choices"][0]["text"]
        status, metrics = req(r0.port, "GET", "/metrics")
        drafts = [l for l in metrics.decode().splitlines()
                  if l.startswith("vllm:spec_decode_num_draft_tokens")]
        print(f"dspark under TP through the server: one process {want!r}, TP pair {got!r}; "
              f"{drafts[0] if drafts else 'no draft counter'}", flush=True)
        assert got == want
        assert drafts and float(drafts[0].rsplit(" ", 1)[1]) > 0, drafts
        assert r0.stop() == 0, r0.text()
        assert r1.wait(20) == 0, "rank 1 did not stop with rank 0:\n" + r1.text()
    finally:
        shutil.rmtree(model, ignore_errors=True)


def main():
    fab = Fabric()
    try:
        base = random.randint(20000, 29000)
        test_logits(fab, base)
        test_server(fab, base + 1)
        test_mismatch(fab, base + 2)
        if TINY8_VISION:
            test_image(fab, base + 3)
        else:
            print("SKIP image chat: no dsv41_tiny8_vision given", flush=True)
        if TINY8_DSPARK:
            test_dspark(fab, base + 4)
        else:
            print("SKIP dspark: no dsv41_tiny8_dspark given", flush=True)
    finally:
        for p in Proc.started:
            if p.p.poll() is None:
                p.p.kill()
                p.p.wait()
        fab.cleanup()
        if fab.ns:
            left = ip("netns", "list").stdout
            assert fab.ns[0] not in left and fab.ns[1] not in left, left
    print("tp netns test: all passed")


if __name__ == "__main__":
    main()
