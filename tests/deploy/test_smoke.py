#!/usr/bin/env python3
"""Black-box test of scripts/smoke.py against the real dsv41-server on the tiny8 model.

    test_smoke.py DSV41_SERVER MODEL_DIR SMOKE_PY

The seed's command (`smoke.py http://127.0.0.1:8000`) takes the key from DSV41_API_KEY or
~/.dsv41-two-sparks/api_key; tiny8 has no vision tower, so the image check passes only with
--allow-no-vision; a closed port gives FAIL lines, not a traceback.
"""
import os
import socket
import subprocess
import sys
import tempfile
import unittest

BINARY, MODEL, SMOKE = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from server_harness import Server  # noqa: E402

KEY = "smoke-test-key-7"


class SmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(BINARY, MODEL, "--max-context", "1024", key=KEY)
        cls.url = f"http://127.0.0.1:{cls.s.port}"
        cls.home = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()
        cls.home.cleanup()

    def smoke(self, *args, **env):
        e = dict(os.environ, HOME=self.home.name)  # no real ~/.dsv41-two-sparks here
        e.pop("DSV41_API_KEY", None)
        e.update(env)
        p = subprocess.run([sys.executable, SMOKE] + list(args), env=e, capture_output=True,
                           text=True, timeout=600)
        return p.returncode, p.stdout + p.stderr

    def test_key_from_env(self):
        rc, out = self.smoke(self.url, "--allow-no-vision", DSV41_API_KEY=KEY)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("PASS "), 6, out)

    def test_key_from_home_file(self):
        d = os.path.join(self.home.name, ".dsv41-two-sparks")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "api_key"), "w") as f:
            f.write(KEY + "\n")
        try:
            rc, out = self.smoke(self.url, "--allow-no-vision")
            self.assertEqual(rc, 0, out)
        finally:
            os.unlink(os.path.join(d, "api_key"))

    def test_image_needs_vision_without_the_flag(self):
        rc, out = self.smoke(self.url, DSV41_API_KEY=KEY)
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL chat image: 400", out)
        self.assertIn("PASS chat text", out)

    def test_no_key_names_where_it_looks(self):
        rc, out = self.smoke(self.url, "--allow-no-vision")
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL models: 401", out)
        self.assertIn("DSV41_API_KEY", out)

    def test_closed_port_fails_without_a_traceback(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        rc, out = self.smoke(f"http://127.0.0.1:{port}", DSV41_API_KEY=KEY)
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL health: 0 cannot reach", out)
        self.assertNotIn("Traceback", out)

    def test_unreadable_key_file_is_a_usage_error(self):
        rc, out = self.smoke(self.url, "--key-file", "/nonexistent/key")
        self.assertEqual(rc, 2, out)
        self.assertIn("cannot read the key file", out)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:])
