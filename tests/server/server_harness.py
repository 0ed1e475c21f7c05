"""Starts dsv41-server on an ephemeral loopback port and talks HTTP to it (stdlib only).

Used by test_http.py (ctest label `server`) and usable by hand:
    python3 tests/server/server_harness.py build/server/dsv41-server tests/fixtures/golden/tiny8
"""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

LISTEN_RE = re.compile(r"listening on http://[^:]+:(\d+)")


class Server:
    def __init__(self, binary, model, *flags, key="test-key-0123456789"):
        self.key = key
        self.tmp = tempfile.TemporaryDirectory()
        args = [binary, "--model", model, "--host", "127.0.0.1", "--port", "0",
                "--threads", "1"] + list(flags)
        if key is not None:
            args += ["--api-key", key]
        else:
            args += ["--api-key-file", os.path.join(self.tmp.name, "key")]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.log = []
        self.port = None
        deadline = time.time() + 180
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server exited before listening:\n" + "".join(self.log))
            self.log.append(line)
            m = LISTEN_RE.search(line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("server did not start listening")
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()
        while time.time() < deadline:
            status, _, _ = self.request("GET", "/health", auth=False)
            if status == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("server never became healthy")

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def connect(self, timeout=180):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def headers(self, auth=True, extra=None):
        h = {"Content-Type": "application/json"}
        if auth and self.key:
            h["Authorization"] = "Bearer " + self.key
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, auth=True, headers=None):
        """(status, headers dict lower-case, body bytes)."""
        conn = self.connect()
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            conn.request(method, path, body=data, headers=self.headers(auth, headers))
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def json(self, method, path, body=None, **kw):
        status, headers, data = self.request(method, path, body, **kw)
        return status, json.loads(data) if data else None

    def stream_lines(self, path, body):
        """Raw SSE body lines (without line ends) of a streamed response, and the status."""
        status, headers, data = self.request("POST", path, body)
        return status, headers, data.decode("utf-8").split("\n")

    def stop(self, sig=None):
        if self.proc.poll() is None:
            self.proc.send_signal(sig or 15)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._drain.join(10)  # the last stderr lines, for callers that print the log on failure
        self.proc.stdout.close()
        self.tmp.cleanup()
        return self.proc.returncode


def parse_sse(lines):
    """Checks §2.5 framing: `data: <json>` lines each followed by one blank line, comments
    (`: ...`) allowed, ending with `data: [DONE]` and a blank line. Returns the JSON events."""
    events = []
    i = 0
    done = False
    while i < len(lines):
        line = lines[i]
        if line == "" and i == len(lines) - 1:
            break
        if line.startswith(":"):
            assert lines[i + 1] == "", f"comment not followed by a blank line at {i}"
            i += 2
            continue
        assert not done, f"data after [DONE]: {line!r}"
        assert line.startswith("data: "), f"line {i} is not an SSE data line: {line!r}"
        assert lines[i + 1] == "", f"event at line {i} not followed by a blank line"
        payload = line[len("data: "):]
        if payload == "[DONE]":
            done = True
        else:
            events.append(json.loads(payload))
        i += 2
    assert done, "stream did not end with data: [DONE]"
    return events


if __name__ == "__main__":
    s = Server(sys.argv[1], sys.argv[2], key=None)
    print("port", s.port, "key file", s.tmp.name)
    print(s.json("GET", "/v1/models", auth=False))
    s.stop()
