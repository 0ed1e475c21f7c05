"""Pi end to end (ctest label `server`): pi/install.sh configures a temporary
PI_CODING_AGENT_DIR that already holds another provider, then
`pi -p --no-session ... < /dev/null` (the pinned @mariozechner/pi-coding-agent from
tests/server/node) talks to the real dsv41-server on the tiny8 model.

    python3 tests/server/test_pi.py SERVER_BINARY MODEL_DIR
"""
import glob
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

from server_harness import Server

BINARY = MODEL = None
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PI_BIN = os.path.join(ROOT, "tests", "server", "node", "node_modules", ".bin")
KEY = "pi-test-key-0123456789"


class PiTest(unittest.TestCase):
    def test_install_and_print_mode(self):
        self.assertTrue(os.path.exists(os.path.join(PI_BIN, "pi")),
                        f"{PI_BIN}/pi missing: run scripts/setup.sh (npm ci)")
        s = Server(BINARY, MODEL, "--max-context", "4096", key=KEY)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                agent = os.path.join(tmp, "agent")
                os.makedirs(agent)
                other = {"baseUrl": "http://127.0.0.1:1/v1", "api": "openai-completions",
                         "apiKey": "other-key", "models": [{"id": "m"}]}
                with open(os.path.join(agent, "models.json"), "w") as f:
                    json.dump({"providers": {"other": other}}, f)
                os.chmod(os.path.join(agent, "models.json"), 0o600)  # holds other-key
                with open(os.path.join(agent, "settings.json"), "w") as f:
                    json.dump({"enabledModels": ["other/m"]}, f)
                env = dict(os.environ, PI_CODING_AGENT_DIR=agent, DSV41_API_KEY=KEY,
                           SET_DEFAULT="1", PI_INSTALL="0", PI_OFFLINE="1",
                           PI_SKIP_VERSION_CHECK="1",
                           PATH=PI_BIN + os.pathsep + os.environ.get("PATH", ""))
                for _ in range(2):  # re-running replaces, never duplicates
                    r = subprocess.run(["bash", os.path.join(ROOT, "pi", "install.sh"),
                                        f"http://127.0.0.1:{s.port}"], env=env,
                                       capture_output=True, text=True, timeout=60)
                    self.assertEqual(r.returncode, 0, r.stderr)
                models = json.load(open(os.path.join(agent, "models.json")))
                self.assertEqual(models["providers"]["other"], other)
                mine = models["providers"]["dsv41-sparks"]
                self.assertEqual(mine["baseUrl"], f"http://127.0.0.1:{s.port}/v1")
                settings = json.load(open(os.path.join(agent, "settings.json")))
                self.assertEqual(settings["enabledModels"],
                                 ["other/m", "dsv41-sparks/deepseek-v4.1-flash"])
                self.assertEqual(settings["defaultProvider"], "dsv41-sparks")
                backups = glob.glob(os.path.join(agent, "models.json.*.bak"))
                self.assertTrue(backups)
                # The file and its backups keep 0600: they hold the other provider's key.
                for path in [os.path.join(agent, "models.json")] + backups:
                    self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, path)
                self.assertTrue(os.path.exists(os.path.join(agent, "extensions",
                                                            "dsv41-sparks.ts")))
                for path in glob.glob(os.path.join(agent, "**", "*"), recursive=True):
                    if os.path.isfile(path):
                        self.assertNotIn(KEY, open(path, errors="replace").read(), path)

                with open(os.devnull) as devnull:
                    r = subprocess.run(
                        ["pi", "-p", "--no-session", "--model",
                         "dsv41-sparks/deepseek-v4.1-flash", "--thinking", "off", "--no-tools",
                         "--mode", "json", "Hello"],
                        env=env, cwd=tmp, stdin=devnull, capture_output=True, text=True,
                        timeout=180)
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                events = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
                ends = [e for e in events if e.get("type") == "message_end"
                        and e["message"]["role"] == "assistant"]
                self.assertEqual(len(ends), 1, r.stdout[-2000:])
                msg = ends[0]["message"]
                self.assertNotIn(msg.get("stopReason"), ("error", "aborted"),
                                 msg.get("errorMessage"))
                text = "".join(p.get("text", "") for p in msg["content"]
                               if p.get("type") == "text")
                self.assertTrue(text, msg)
                self.assertGreater(msg["usage"]["input"], 0)
        finally:
            self.assertEqual(s.stop(), 0, "".join(s.log))


if __name__ == "__main__":
    BINARY, MODEL = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
