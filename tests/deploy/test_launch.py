"""Black-box tests of scripts/launch.sh (docs/deploy.md): the two-node launcher run on one
machine. The "worker" is reached through tests/deploy/fake_ssh.sh (runs the remote script
locally in a temporary home), both ranks are real dsv41-server processes on the tiny8 model
(CPU backend) joined over loopback, and `rdma` / `ip` are stubs for the fabric detection.

    test_launch.py SERVER_BIN MODEL_DIR LAUNCH_SH
"""
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

from checks import check, finish  # tests/deploy/checks.py (the script's own folder)

SERVER, MODEL, LAUNCH = (os.path.abspath(a) for a in sys.argv[1:4])
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


class Fixture:
    """Temporary head state dir, worker home, stub bin dir and the launcher's environment."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="dsv41-launch-")
        self.state = os.path.join(self.tmp, "head-state")
        self.home = os.path.join(self.tmp, "worker-home")
        self.stubs = os.path.join(self.tmp, "stubs")
        self.ssh_log = os.path.join(self.tmp, "ssh.log")
        for d in (self.home, self.stubs):
            os.makedirs(d)
        # rdma: the first ACTIVE port's netdev has no IPv4 (skipped), the second has one; the
        # third port is DOWN. ip: per node (FAKE_NODE=worker inside fake ssh).
        write_exe(os.path.join(self.stubs, "rdma"), """#!/bin/sh
[ -n "$FAKE_NO_RDMA" ] && exit 0
echo "link rocep1s0f0/1 state ACTIVE physical_state LINK_UP netdev enp1s0f0np0"
echo "link roceP2p1s0f0/1 state ACTIVE physical_state LINK_UP netdev enP2p1s0f0np0"
echo "link rocep1s0f1/1 state DOWN physical_state DISABLED netdev enp1s0f1np1"
""")
        write_exe(os.path.join(self.stubs, "ip"), """#!/bin/sh
# ip -4 -o addr show dev IFNAME
dev="$6"
if [ "$FAKE_NODE" = worker ]; then a=10.10.10.11; else a=10.10.10.13; fi
case "$dev" in
  enP2p1s0f0np0) echo "5: $dev    inet $a/24 brd 10.10.10.255 scope global $dev\\       valid_lft forever preferred_lft forever" ;;
  eth9) echo "7: $dev    inet 192.168.7.$( [ "$FAKE_NODE" = worker ] && echo 2 || echo 1)/24 scope global $dev" ;;
esac
""")
        self.port, self.tp_port = free_port(), free_port()
        self.env = dict(os.environ)
        for k in ("HEAD_IP", "WORKER_IP", "HEAD_IFNAME", "WORKER_IFNAME", "RDMA", "NCCL",
                  "EXTRA_ARGS", "SPEC_METHOD", "SPEC_TOKENS"):
            self.env.pop(k, None)
        self.env.update({
            "WORKER": "tester@worker", "SSH": os.path.join(HERE, "fake_ssh.sh"),
            "FAKE_SSH_HOME": self.home, "FAKE_SSH_LOG": self.ssh_log, "MODEL_DIR": MODEL,
            "STATE_DIR": self.state, "WORKER_STATE_DIR": "dsv41-state", "SERVER_BIN": SERVER,
            "BACKEND": "cpu", "EXTRA_ARGS": "--threads 1", "HOST": "127.0.0.1",
            # tiny8 has no DSpark module (mtp.*): prompt-lookup drafts, still 7 per step.
            "SPEC_METHOD": "ngram",
            "PORT": str(self.port), "TP_PORT": str(self.tp_port), "WAIT_S": "240",
            "MEMGUARD_GIB": "0.001", "LINES": "400",
            "PATH": self.stubs + os.pathsep + os.environ.get("PATH", ""),
        })

    def run(self, *args, timeout=300, cwd=None, **env):
        e = dict(self.env)
        e.update(env)
        p = subprocess.run(["bash", LAUNCH] + list(args), env=e, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)
        return p.returncode, p.stdout, p.stderr

    def worker_path(self, *parts):
        return os.path.join(self.home, "dsv41-state", *parts)

    def pid(self, path):
        try:
            return int(open(path).read().strip())
        except (OSError, ValueError):
            return None

    def cleanup(self):
        self.run("stop", timeout=120)
        for f in (os.path.join(self.state, "r0.pid"), self.worker_path("r1.pid"),
                  os.path.join(self.state, "memguard.pid"), self.worker_path("memguard.pid")):
            p = self.pid(f)
            if p and running(p):
                os.kill(p, 9)
        shutil.rmtree(self.tmp, ignore_errors=True)


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def procs_with(port):
    """Live processes with the test's unique TP port as an argument (rank 0's --tp-port PORT,
    rank 1's --peer HOST:PORT)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid() and running(int(d)):
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if f"\0{port}\0".encode() in cmd or f":{port}\0".encode() in cmd:
                found.append(int(d))
    return found


class Squatter:
    """Something else answering 200 on the port (e.g. the old serving container)."""

    def __init__(self, port):
        import http.server
        import threading

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def http(port, path, key=None, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(body).encode() if body else None)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_detect(fx):
    rc, out, err = fx.run("detect")
    check(rc == 0 and "head:   ip 10.10.10.13 hca roceP2p1s0f0" in out
          and "worker: ip 10.10.10.11 hca roceP2p1s0f0" in out,
          "detect: first ACTIVE RDMA port with an IPv4 on each node", out + err)
    rc, out, err = fx.run("detect", HEAD_IFNAME="eth9", WORKER_IFNAME="eth9")
    check(rc == 0 and "ip 192.168.7.1" in out and "ip 192.168.7.2" in out,
          "detect: HEAD_IFNAME / WORKER_IFNAME pick the interface", out + err)
    rc, out, err = fx.run("detect", HEAD_IFNAME="nosuch0")
    check(rc == 1 and "HEAD_IFNAME=nosuch0 has no IPv4" in err, "detect: unknown interface named",
          out + err)
    rc, out, err = fx.run("detect", FAKE_NO_RDMA="1")
    check(rc == 1 and "set HEAD_IP" in err, "detect: no active port asks for HEAD_IP", out + err)
    rc, out, err = fx.run("detect", HEAD_IP="10.0.0.1", WORKER_IP="10.0.0.1")
    check(rc == 1 and "both 10.0.0.1" in err, "detect: one address for both nodes is refused",
          out + err)
    rc, out, err = fx.run("detect", HEAD_IP="10.0.0.1", WORKER_IP="10.0.0.2", FAKE_NO_RDMA="1")
    check(rc == 0 and "head:   ip 10.0.0.1" in out and "worker: ip 10.0.0.2" in out,
          "detect: HEAD_IP / WORKER_IP override the detection", out + err)


def test_bad_setup(fx):
    rc, _, err = fx.run("start", WORKER="")
    check(rc == 1 and "set WORKER" in err, "start without WORKER names it", err)
    rc, _, err = fx.run("start", SERVER_BIN="/nonexistent/dsv41-server")
    check(rc == 1 and "no server binary at /nonexistent/dsv41-server" in err,
          "start names a missing server binary", err)
    rc, _, err = fx.run("start", MODEL_DIR=fx.tmp)
    check(rc == 1 and "has no config.json" in err, "start names a model dir without config", err)
    rc, _, err = fx.run("start", WORKER_MODEL_DIR="/nonexistent/model", HEAD_IP="127.0.0.1",
                        WORKER_IP="127.0.0.1")
    check(rc == 1 and "/nonexistent/model/config.json" in err,
          "start names the worker's missing model", err)
    rc, _, err = fx.run("start", SSH="false")
    check(rc == 1 and "cannot reach the worker" in err, "start names an unreachable worker", err)
    rc, _, err = fx.run("start", MEMGUARD_GIB="2G")
    check(rc == 1 and "MEMGUARD_GIB='2G'" in err, "a bad MEMGUARD_GIB is refused before starting",
          err)
    rc, _, err = fx.run("start", CUDA_TUNABLES="DSV41_CUDA_VISION=false DSV41_API_KEY=x")
    check(rc == 1 and "CUDA_TUNABLES: 'DSV41_API_KEY=x' is not DSV41_CUDA_NAME=VALUE" in err,
          "a non-CUDA tunable in CUDA_TUNABLES is refused before starting", err)
    rc, _, err = fx.run("start", NCCL="1", BACKEND="cpu")
    check(rc == 1 and "NCCL=1 needs BACKEND=cuda" in err,
          "NCCL=1 with the CPU backend is refused before starting", err)
    rc, _, err = fx.run("start", NCCL="yes")
    check(rc == 1 and "NCCL='yes' must be 0 or 1" in err, "NCCL takes 0 or 1", err)
    rc, _, err = fx.run("start", WORKER_MODEL_DIR="~other/model")
    check(rc == 1 and "WORKER_MODEL_DIR=~other/model" in err, "a ~user worker path is refused",
          err)
    squat = Squatter(fx.port)
    try:
        rc, _, err = fx.run("start", HEAD_IP="127.0.0.1", WORKER_IP="127.0.0.2")
        check(rc == 1 and "something already answers" in err and str(fx.port) in err,
              "a port that already answers /health is refused", err)
    finally:
        squat.close()
    check(not procs_with(fx.tp_port), "nothing started by a refused start")
    rc, _, err = fx.run("logs", "r2")
    check(rc == 2 and "usage" in err, "logs with a bad rank is a usage error", err)
    check(not os.path.exists(os.path.join(fx.state, "r0.pid")), "nothing started by bad setups")


def test_lifecycle(fx):
    env = {"HEAD_IP": "127.0.0.1", "WORKER_IP": "127.0.0.2"}
    # Relative local paths (resolved before the ranks cd into STATE_DIR), worker paths given as
    # "~/..." (the worker's home), and a DSV41_API_KEY exported for Pi that must not replace the
    # key file (the server prefers the variable).
    os.symlink(MODEL, os.path.join(fx.home, "model"))
    first = dict(env, SERVER_BIN=os.path.relpath(SERVER, fx.tmp),
                 MODEL_DIR=os.path.relpath(MODEL, fx.tmp), STATE_DIR="head-state",
                 WORKER_MODEL_DIR="~/model", WORKER_STATE_DIR="~/dsv41-state",
                 DSV41_API_KEY="stale-key-exported-for-pi",
                 CUDA_TUNABLES="DSV41_CUDA_VISION=false DSV41_CUDA_MAX_CHUNK=512")
    t0 = time.time()
    rc, out, err = fx.run("start", cwd=fx.tmp, **first)
    check(rc == 0 and "ready after" in out and f"http://127.0.0.1:{fx.port}/v1 here" in out,
          f"start with relative and ~/ paths: both ranks up ({time.time() - t0:.0f} s)",
          out + err)
    if rc != 0:
        return
    key_file = os.path.join(fx.state, "api_key")
    mode = stat.S_IMODE(os.stat(key_file).st_mode)
    check(mode == 0o600, f"API key file is 0600 (is {oct(mode)})")
    key = open(key_file).read().strip()
    check(len(key) == 64, "API key is 32 random bytes in hex")
    with open(SERVER, "rb") as a, open(fx.worker_path("bin", "dsv41-server"), "rb") as b:
        check(a.read() == b.read(), "server binary copied to the worker's state dir")
    status, body = http(fx.port, "/health")
    check(status == 200, "/health 200 on rank 0", body)
    status, body = http(fx.port, "/v1/chat/completions", key,
                        {"model": "deepseek-v4.1-flash", "max_tokens": 8, "temperature": 0,
                         "messages": [{"role": "user", "content": "Hello"}]})
    ok = status == 200 and json.loads(body)["usage"]["completion_tokens"] >= 1
    check(ok, "a chat completion through the two ranks", f"{status} {body}")
    status, _ = http(fx.port, "/v1/models", "wrong-key")
    check(status == 401, "the generated key is enforced")
    status, _ = http(fx.port, "/v1/models", "stale-key-exported-for-pi")
    check(status == 401, "an exported DSV41_API_KEY does not replace the key file")
    r0, r1 = fx.pid(os.path.join(fx.state, "r0.pid")), fx.pid(fx.worker_path("r1.pid"))
    for name, pid in (("rank 0", r0), ("rank 1", r1)):
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        check(b"--speculative-tokens\x007" in b"\0".join(argv)
              and b"--speculative-method\x00ngram" in b"\0".join(argv),
              f"{name} runs with the speculative flags (7 drafts per step)", argv)
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        check(b"DSV41_CUDA_VISION=false" in environ and b"DSV41_CUDA_MAX_CHUNK=512" in environ
              and not any(e.startswith(b"DSV41_API_KEY=") for e in environ),
              f"{name} gets CUDA_TUNABLES and no other DSV41_* variable",
              [e for e in environ if e.startswith(b"DSV41_")])
    rc, out, err = fx.run("status")
    check(rc == 0 and f"rank 0 (head): running, pid {r0}\n" in out
          and f"running, pid {r1}\n" in out and ": 200" in out, "status: healthy, the right pids",
          out + err)
    rc, out, err = fx.run("status", SSH="false")
    check(rc == 1 and "unknown (the worker does not answer" in out
          and f"running, pid {r0}" in out, "status with the worker unreachable says so", out + err)
    g0, g1 = (fx.pid(os.path.join(fx.state, "memguard.pid")),
              fx.pid(fx.worker_path("memguard.pid")))
    check(all(p and running(p) for p in (r0, r1, g0, g1)),
          "pid files name the running ranks and both memory guards", f"{r0} {r1} {g0} {g1}")
    rc, _, err = fx.run("start", **env)
    check(rc == 1 and "already running" in err, "a second start is refused", err)
    rc, out, _ = fx.run("logs", "r0")
    check(rc == 0 and "listening on http://" in out, "logs r0 shows rank 0's log", out[-2000:])
    rc, out, _ = fx.run("logs", "r1")
    check(rc == 0 and "rank 1" in out.lower(), "logs r1 shows the worker's log", out[-2000:])
    rc, out, err = fx.run("stop", SSH="false")
    check(rc == 1 and "does not answer" in err and not running(r0),
          "stop with the worker unreachable: rank 0 stopped, the worker named", out + err)
    rc, out, err = fx.run("stop")
    check(rc == 0 and "stopped" in out, "stop", out + err)
    deadline = time.time() + 15
    while time.time() < deadline and any(running(p) for p in (r0, r1, g0, g1)):
        time.sleep(0.2)
    check(not any(running(p) for p in (r0, r1, g0, g1)), "stop ends both ranks and both guards",
          f"{[(p, running(p)) for p in (r0, r1, g0, g1)]}")
    rc, out, _ = fx.run("status")
    check(rc == 1 and out.count("not running") == 2, "status after stop: exit 1, not running", out)
    # Second start: the worker's binary is current, so nothing is copied again.
    open(fx.ssh_log, "w").close()
    rc, out, err = fx.run("start", **env)
    copies = [l for l in open(fx.ssh_log) if "cat >" in l]
    check(rc == 0 and not copies, "restart after stop, no second copy of the binary",
          out + err + "".join(copies))
    fx.run("stop")


def test_worker_lost_during_start(fx):
    # The worker stops answering when its memory guard is started: start fails naming that, and
    # says rank 1 may still run there (the script used to end silently under set -e, rank 0 left
    # running).
    rc, out, err = fx.run("start", HEAD_IP="127.0.0.1", WORKER_IP="127.0.0.2",
                          FAKE_SSH_DROP_FROM="memguard.sh r1.pid", timeout=240)
    check(rc == 1 and "tester@worker did not answer over SSH when its memory guard was started"
          in err
          and "rank 1 and its guard may still run there" in err,
          "worker lost during start: the reason and the warning are printed", out + err[-3000:])
    r0 = fx.pid(os.path.join(fx.state, "r0.pid"))
    check(not (r0 and running(r0)), "rank 0 stopped after the failed start", f"{r0}")


def test_rank_mismatch(fx):
    # A worker model whose config.json differs in bytes only: the rendezvous refuses it (config
    # hash), both ranks exit, and start reports it instead of waiting.
    other = os.path.join(fx.tmp, "tiny8-other")
    os.makedirs(other)
    for name in os.listdir(MODEL):
        if name != "config.json":
            os.symlink(os.path.join(MODEL, name), os.path.join(other, name))
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(other, "config.json"), "w") as f:
        json.dump(cfg, f, indent=3)
    rc, out, err = fx.run("start", HEAD_IP="127.0.0.1", WORKER_IP="127.0.0.2",
                          WORKER_MODEL_DIR=other, timeout=240)
    check(rc == 1 and "exited during start-up" in err and "config" in err.lower(),
          "mismatched worker model: start fails naming it, with the log tail", out + err[-3000:])
    left = procs_with(fx.tp_port)
    check(not left, "nothing left running after the failure (no process with the TP port)",
          f"{left}")


def main():
    for name, test in (("detect", test_detect), ("bad setup", test_bad_setup),
                       ("lifecycle", test_lifecycle),
                       ("worker lost during start", test_worker_lost_during_start),
                       ("rank mismatch", test_rank_mismatch)):
        print(f"== {name}", flush=True)
        fx = Fixture()
        try:
            test(fx)
        finally:
            fx.cleanup()
    return finish("launch")


if __name__ == "__main__":
    sys.exit(main())
