"""A local stand-in for the two Hugging Face endpoints scripts/download.sh uses (stdlib only).

  GET /api/models/<repo>/tree/<revision>?recursive=true[&cursor=N]   the file list (JSON array)
  GET /<repo>/resolve/<revision>/<path>                              a file's bytes

Like the real hub, a resolve request for an LFS file answers 302 to a separate blob URL
(/lfs/<path> on another host name and port, as the hub's CDN) that needs no token, so the script's redirect handling is exercised too.

Test hooks (attributes of FakeHF, set before or between runs):
  page_size   entries per tree page; more pages are chained with `Link: <url>; rel="next"`
  token       when set, tree and resolve requests without `Authorization: Bearer <token>` get 401
  cut_after   {path: K}: the first body sent for path stops after file byte K, then the
              connection is closed mid-response (Content-Length promised the whole rest)
  corrupt     {path, ...}: the served bytes differ from the listing's sha256 (one byte flipped)
  hidden      {path, ...}: listed, but resolve answers 404
  requests    a log of every request: dicts with method, path (URL path), range, status

Usable from tests:
    with FakeHF({"a.bin": b"..."}, repo="org/model") as hub:
        run the script with HF_ENDPOINT=hub.url ...; then inspect hub.requests
or by hand:  python3 tests/deploy/fake_hf_server.py DIR  (serves DIR's files as org/model)
"""
import hashlib
import http.server
import json
import os
import socket
import sys
import threading
import urllib.parse


class FakeHF:
    def __init__(self, files, repo="org/model", revision="main", page_size=None, token=None,
                 no_lfs=()):
        self.files = dict(files)      # repository path -> bytes
        self.repo = repo
        self.revision = revision
        self.page_size = page_size
        self.token = token
        self.no_lfs = set(no_lfs)     # listed without an "lfs" object (small text files)
        self.cut_after = {}
        self.corrupt = set()
        self.hidden = set()
        self.requests = []
        self._cut_done = set()
        self._lock = threading.Lock()
        self._httpd = None
        self._cdn = None
        self.url = None
        self.cdn_url = None  # the blob store, another host name (localhost) and port

    # -- helpers for assertions ------------------------------------------------------------
    def resolve_requests(self, path=None):
        """Logged resolve requests (for one repository path when given)."""
        prefix = f"/{self.repo}/resolve/{self.revision}/"
        return [r for r in self.requests if r["path"].startswith(prefix)
                and (path is None or r["path"] == prefix + path)]

    def blob_requests(self, path):
        """Logged requests that fetched the bytes of `path` (resolve, or the LFS redirect target)."""
        return [r for r in self.requests
                if r["path"] in (f"/{self.repo}/resolve/{self.revision}/{path}", f"/lfs/{path}")]

    def tree_requests(self):
        return [r for r in self.requests if r["path"].startswith("/api/models/")]

    # -- the file list ------------------------------------------------------------------------
    def _entries(self):
        """Entries as the hub lists them: directories too, plus a .gitattributes to be ignored."""
        entries, dirs = [], set()
        paths = sorted(self.files) + [".gitattributes"]
        for path in paths:
            parts = path.split("/")
            for k in range(1, len(parts)):
                d = "/".join(parts[:k])
                if d not in dirs:
                    dirs.add(d)
                    entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": d})
            data = self.files.get(path, b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
            entry = {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data),
                     "path": path}
            if path in self.files and path not in self.no_lfs:
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            entries.append(entry)
        return entries

    def _served_bytes(self, path):
        data = self.files[path]
        if path in self.corrupt and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        return data

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self):
        handler = type("Handler", (_Handler,), {"hub": self})
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        # LFS redirects go to another host, as the hub's go to its CDN: the token must not follow.
        self._cdn = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._cdn.daemon_threads = True
        self.cdn_url = f"http://localhost:{self._cdn.server_address[1]}"
        threading.Thread(target=self._cdn.serve_forever, daemon=True).start()
        return self.url

    def stop(self):
        for srv in (self._httpd, self._cdn):
            if srv:
                srv.shutdown()
                srv.server_close()
        self._httpd = self._cdn = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real hub: a cut must be detected by length
    hub = None                     # set per server by FakeHF.start

    def log_message(self, *args):  # quiet: the tests print the script's output instead
        pass

    def _log(self, status):
        with self.hub._lock:
            self.hub.requests.append({"method": self.command, "path": self._path, "status": status,
                                      "range": self.headers.get("Range"),
                                      "auth": self.headers.get("Authorization")})

    def _head(self, status, length, headers):
        """Logs the request and sends the status line and headers for a body of `length`."""
        self._log(status)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send(self, status, body=b"", headers=()):
        self._head(status, len(body), headers)
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self):
        if self.hub.token is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {self.hub.token}":
            return True
        self._send(401, b'{"error":"Invalid credentials in Authorization header"}',
                   [("Content-Type", "application/json")])
        return False

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        hub = self.hub
        url = urllib.parse.urlsplit(self.path)
        self._path = urllib.parse.unquote(url.path)
        tree = f"/api/models/{hub.repo}/tree/{hub.revision}"
        resolve = f"/{hub.repo}/resolve/{hub.revision}/"
        if self._path == tree:
            if self._authorized():
                self._tree(urllib.parse.parse_qs(url.query))
        elif self._path.startswith(resolve):
            if not self._authorized():
                return
            path = self._path[len(resolve):]
            if path not in hub.files or path in hub.hidden:
                self._send(404, b"Entry not found", [("X-Error-Code", "EntryNotFound")])
            elif path in hub.no_lfs:
                self._body(path)
            else:  # LFS: redirect to the blob store, which needs no token (a signed URL)
                self._send(302, b"", [("Location",
                                       hub.cdn_url + "/lfs/" + urllib.parse.quote(path))])
        elif self._path.startswith("/lfs/") and self._path[5:] in self.hub.files:
            self._body(self._path[5:])
        else:
            self._send(404, b"Repository not found")

    def _tree(self, query):
        hub = self.hub
        if query.get("recursive") != ["true"]:
            return self._send(400, b"this fake only serves recursive=true listings")
        entries = hub._entries()
        start = int(query.get("cursor", ["0"])[0])
        size = hub.page_size or len(entries)
        headers = [("Content-Type", "application/json")]
        if start + size < len(entries):
            # Absolute, as the hub sends it; the script must follow it as given.
            headers.append(("Link", f'<{hub.url}/api/models/{hub.repo}/tree/{hub.revision}'
                                    f'?recursive=true&cursor={start + size}>; rel="next"'))
        self._send(200, json.dumps(entries[start:start + size]).encode(), headers)

    def _body(self, path):
        data = self.hub._served_bytes(path)
        start, status, headers = 0, 200, [("Accept-Ranges", "bytes"), ("ETag", '"x"')]
        rng = self.headers.get("Range")
        if rng:
            # Only the form the script sends: "bytes=N-".
            if not (rng.startswith("bytes=") and rng.endswith("-") and rng[6:-1].isdigit()):
                return self._send(400, b"unsupported Range")
            start = int(rng[6:-1])
            if start >= len(data):
                return self._send(416, b"", [("Content-Range", f"bytes */{len(data)}")])
            status = 206
            headers.append(("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}"))
        body = data[start:]
        cut = self.hub.cut_after.get(path)
        with self.hub._lock:
            do_cut = cut is not None and path not in self.hub._cut_done and start < cut
            if do_cut:
                self.hub._cut_done.add(path)
        if not do_cut:
            return self._send(status, body, headers)
        # Promise the whole rest, send up to byte `cut`, then drop the connection.
        self._head(status, len(body), headers)
        self.wfile.write(body[:cut - start])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


if __name__ == "__main__":
    root = sys.argv[1]
    files = {}
    for d, _, names in os.walk(root):
        for name in names:
            full = os.path.join(d, name)
            files[os.path.relpath(full, root)] = open(full, "rb").read()
    with FakeHF(files) as hub:
        print(f"HF_ENDPOINT={hub.url} MODEL_REPO={hub.repo}", flush=True)
        threading.Event().wait()
