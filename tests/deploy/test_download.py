"""Black-box tests of scripts/download.sh against a local fake of the Hugging Face hub.

Usage: python3 tests/deploy/test_download.py scripts/download.sh   (ctest: deploy:download)

The fake repository mirrors the Spark checkpoint's shape at a few hundred KB per file: six native
shards of which two ship as pieces (a 3-piece group and an 11-piece group with unpadded numbers,
so lexical and numeric order differ), EXL3 plan/bank files (one named *.part.safetensors, which is
not a piece), small non-LFS text files, and the sha256 manifest of the six native shards.
"""
import hashlib
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_hf_server import FakeHF  # noqa: E402

SCRIPT = None  # set from argv in main
REPO = "org/DeepSeek-V4.1-Flash-Spark"
SHARD = "model-{:05d}-of-00006.safetensors"
G3 = SHARD.format(5)   # 3 pieces: .part00 .. .part02
G11 = SHARD.format(6)  # 11 pieces: .part0 .. .part10
PIECE = re.compile(r"\.part\d+$")


def sha(data):
    return hashlib.sha256(data).hexdigest()


def make_repo(seed=41):
    """(files served by the fake, the native shards' bytes, the pieces of each group)."""
    rnd = random.Random(seed)
    blob = lambda n: rnd.randbytes(n)  # noqa: E731
    native = {SHARD.format(k): blob(200_000 + 1000 * k) for k in range(1, 7)}
    pieces = {G3: [f"{G3}.part{k:02d}" for k in range(3)],
              G11: [f"{G11}.part{k}" for k in range(11)]}
    files = {}
    for name, data in native.items():
        if name in pieces:
            n = len(pieces[name])
            step = -(-len(data) // n)
            for k, piece in enumerate(pieces[name]):
                files[piece] = data[k * step:(k + 1) * step]
        else:
            files[name] = data
    files["exl3/plan/plan.json"] = b'{"experts": "K3"}\n'
    files["exl3/bank/K3/L01.safetensors"] = blob(150_000)
    files["exl3/bank/K3/L02.part.safetensors"] = blob(120_000)
    files["config.json"] = b'{"model_type": "deepseek_v4"}\n'
    files["model.safetensors.index.json"] = b'{"weight_map": {}}\n'
    files["sha256-manifest.txt"] = manifest(native)
    return files, native, pieces


def manifest(entries):
    return "".join(f"{sha(d) if isinstance(d, bytes) else d}  {p}\n"
                   for p, d in sorted(entries.items())).encode()


TEXT = ("exl3/plan/plan.json", "config.json", "model.safetensors.index.json",
        "sha256-manifest.txt")


class DownloadTest(unittest.TestCase):
    def setUp(self):
        self.files, self.native, self.pieces = make_repo()
        self.tmp = tempfile.TemporaryDirectory()
        self.model_dir = os.path.join(self.tmp.name, "model")
        self.hub = FakeHF(self.files, repo=REPO, no_lfs=TEXT)
        self.hub.start()

    def tearDown(self):
        self.hub.stop()
        self.tmp.cleanup()

    def run_script(self, *args, **env):
        """Runs the script (with `args`) against the fake; env values override (None removes a
        variable)."""
        full = {k: v for k, v in os.environ.items()
                if not k.startswith(("HF_", "DSV41_")) and k not in
                ("MODEL_REPO", "REVISION", "MODEL_DIR", "KEEP_PARTS", "MANIFEST", "CURL_RETRIES")}
        full.update(HF_ENDPOINT=self.hub.url, MODEL_REPO=REPO, MODEL_DIR=self.model_dir,
                    CURL_RETRIES="3")
        for k, v in env.items():
            if v is None:
                full.pop(k, None)
            else:
                full[k] = v
        return subprocess.run(["bash", SCRIPT, *args], env=full, capture_output=True, text=True,
                              timeout=120)

    def explain(self, proc):
        return (f"\n--- exit {proc.returncode}\n--- stdout:\n{proc.stdout}"
                f"\n--- stderr:\n{proc.stderr}")

    def assert_ok(self, proc):
        self.assertEqual(proc.returncode, 0, "script failed" + self.explain(proc))

    def assert_fails(self, proc, *needles):
        self.assertNotEqual(proc.returncode, 0, "script should have failed" + self.explain(proc))
        for needle in needles:
            self.assertIn(needle, proc.stderr, f"stderr should name {needle!r}" + self.explain(proc))

    def path(self, rel):
        return os.path.join(self.model_dir, rel)

    def read(self, rel):
        with open(self.path(rel), "rb") as f:
            return f.read()

    def assert_complete(self, proc, keep_parts=False):
        """Every file byte-identical under its repository path; pieces gone unless kept."""
        for rel, data in list(self.native.items()) + list(self.files.items()):
            if PIECE.search(rel):
                continue
            self.assertTrue(os.path.isfile(self.path(rel)), f"{rel} missing" + self.explain(proc))
            self.assertEqual(self.read(rel), data, f"{rel} differs" + self.explain(proc))
        for group in self.pieces.values():
            for piece in group:
                self.assertEqual(os.path.exists(self.path(piece)), keep_parts,
                                 f"{piece}: kept={keep_parts} expected" + self.explain(proc))
                if keep_parts:
                    self.assertEqual(self.read(piece), self.files[piece])
        self.assertFalse(os.path.exists(self.path(".gitattributes")), ".gitattributes fetched")
        left = [os.path.join(d, n) for d, _, ns in os.walk(self.model_dir)
                for n in ns if n.endswith(".incomplete")]
        self.assertEqual(left, [], "leftover .incomplete files" + self.explain(proc))

    # ---- the cases ---------------------------------------------------------------------------
    def test_fresh_download_then_rerun_makes_no_requests(self):
        proc = self.run_script()
        self.assert_ok(proc)
        self.assert_complete(proc)
        self.assertIn("verified", proc.stdout)
        before = len(self.hub.resolve_requests())
        again = self.run_script()
        self.assert_ok(again)
        self.assert_complete(again)
        self.assertEqual(self.hub.resolve_requests()[before:], [],
                         "re-run fetched files (deleted pieces must not come back)"
                         + self.explain(again))

    def test_keep_parts(self):
        proc = self.run_script(KEEP_PARTS="1")
        self.assert_ok(proc)
        self.assert_complete(proc, keep_parts=True)
        before = len(self.hub.resolve_requests())
        again = self.run_script(KEEP_PARTS="1")
        self.assert_ok(again)
        self.assertEqual(len(self.hub.resolve_requests()), before, "re-run fetched files" +
                         self.explain(again))

    def test_interrupted_transfer_resumes_with_range(self):
        shard, piece = SHARD.format(1), self.pieces[G3][1]
        self.hub.cut_after = {shard: 70_000, piece: 10_000}
        proc = self.run_script()
        self.assert_ok(proc)
        self.assert_complete(proc)
        for rel, k in self.hub.cut_after.items():
            ranges = [r["range"] for r in self.hub.blob_requests(rel) if r["range"]]
            self.assertIn(f"bytes={k}-", ranges,
                          f"{rel}: no resume from byte {k} seen in {self.hub.blob_requests(rel)}"
                          + self.explain(proc))

    def test_corrupt_file_is_rejected_and_refetched_from_zero(self):
        rel = SHARD.format(2)
        self.hub.corrupt = {rel}
        proc = self.run_script()
        bad = bytearray(self.files[rel])
        bad[0] ^= 0xFF
        self.assert_fails(proc, rel, sha(self.files[rel]), sha(bytes(bad)))
        self.assertFalse(os.path.exists(self.path(rel)), "corrupt file under its final name")
        # The next run must not resume the corrupt prefix: a fresh download, no Range.
        self.hub.corrupt = set()
        before = len(self.hub.blob_requests(rel))
        again = self.run_script()
        self.assert_ok(again)
        self.assert_complete(again)
        retry = self.hub.blob_requests(rel)[before:]
        self.assertTrue(retry and not any(r["range"] for r in retry),
                        f"{rel} should be fetched again from byte 0: {retry}" + self.explain(again))

    def test_manifest_mismatch_for_reassembled_shard(self):
        native = dict(self.native)
        native[G3] = "0" * 64
        self.hub.files["sha256-manifest.txt"] = manifest(native)
        proc = self.run_script()
        self.assert_fails(proc, G3, "0" * 64, sha(self.native[G3]))
        self.assertFalse(os.path.exists(self.path(G3)), "mismatching shard under its final name")

    def test_manifest_without_entry_for_reassembled_shard(self):
        native = {k: v for k, v in self.native.items() if k != G11}
        self.hub.files["sha256-manifest.txt"] = manifest(native)
        self.assert_fails(self.run_script(), G11)

    def test_manifest_entry_missing_from_repo(self):
        self.hub.files["sha256-manifest.txt"] = manifest(dict(self.native, **{"extra/gone.bin": b"x"}))
        proc = self.run_script()
        self.assert_fails(proc, "extra/gone.bin")

    def test_token_required(self):
        self.hub.token = "hf_secret"
        proc = self.run_script(HF_TOKEN=None)
        self.assert_fails(proc, "HF_TOKEN", "401")
        self.assertEqual(self.hub.resolve_requests(), [], "files fetched without a token")
        proc = self.run_script(HF_TOKEN="hf_wrong")
        self.assert_fails(proc, "HF_TOKEN")
        proc = self.run_script(HF_TOKEN="hf_secret")
        self.assert_ok(proc)
        self.assert_complete(proc)
        self.assertNotIn("hf_secret", proc.stdout + proc.stderr, "token printed")
        blobs = [r for r in self.hub.requests if r["path"].startswith("/lfs/")]
        self.assertTrue(blobs, "no request reached the blob store")
        self.assertEqual([r for r in blobs if r["auth"]], [], "the token was sent to the CDN host")

    def test_help_and_arguments(self):
        proc = self.run_script("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("HF_ENDPOINT", proc.stdout)
        self.assertEqual(self.hub.requests, [], "--help contacted the hub")
        proc = self.run_script("now")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no arguments", proc.stderr)

    def test_pagination(self):
        self.hub.page_size = 2
        proc = self.run_script()
        self.assert_ok(proc)
        self.assert_complete(proc)
        self.assertGreater(len(self.hub.tree_requests()), 10, "listing was not paginated")

    def test_too_little_free_space(self):
        proc = self.run_script(DSV41_DOWNLOAD_FREE_BYTES="1000")
        # Everything listed (bar .gitattributes) plus each group's reassembled size.
        need = sum(len(d) for d in self.files.values()) + len(self.native[G3]) + len(self.native[G11])
        self.assert_fails(proc, "1000 bytes", f"{need} bytes", "GB")
        self.assertEqual(self.hub.resolve_requests(), [], "downloaded despite too little space")

    def test_missing_file_404_names_file_and_repo(self):
        rel = "exl3/bank/K3/L01.safetensors"
        self.hub.hidden = {rel}
        self.assert_fails(self.run_script(), rel, REPO, "404")

    def test_unstamped_existing_file_is_adopted(self):
        # A file already in place (e.g. fetched by another tool) is hashed, not downloaded.
        rel = SHARD.format(3)
        os.makedirs(self.model_dir)
        with open(self.path(rel), "wb") as f:
            f.write(self.files[rel])
        proc = self.run_script()
        self.assert_ok(proc)
        self.assert_complete(proc)
        self.assertEqual(self.hub.blob_requests(rel), [], "present file fetched again")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_download.py path/to/scripts/download.sh")
    SCRIPT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
