#!/usr/bin/env bash
# `dsv41 image` on a tiny synthetic checkpoint with a vision tower (dsv41_make_synthetic --tiny
# --vision): the layout of a 20x14 PNG (a 7x10 patch grid, 3x4 aligner grid, 17 positions), every
# dump file's size, and one-line errors with a non-zero exit for bad input; then
# `dsv41 generate --image` on the same model (tiny8's tokenizer copied in).
#   test_image.sh DSV41 MAKE_SYNTHETIC FIXTURES_DIR
set -euo pipefail
dsv41="$1" make_synthetic="$2" fixtures="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$make_synthetic" "$work/model" --tiny --vision >/dev/null
python3 - "$work/img.png" <<'PY'
import struct, sys, zlib
w, h = 20, 14
raw = b"".join(b"\0" + bytes((x * 37 + y * 11 + c * 5) & 255 for x in range(w) for c in range(3))
               for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
"$dsv41" image --model "$work/model" --file "$work/img.png" --encode --dump "$work/dump" \
  --threads 2 > "$work/out.json"
python3 - "$work/out.json" "$work/dump" <<'PY'
import json, os, sys
out = json.load(open(sys.argv[1]))
l = out["layout"]
want = {"source": [20, 14], "size": [20, 14], "vit_grid": [7, 10], "llm_grid": [3, 4],
        "stretch": False, "positions": 17, "hidden": 64, "patch_size": 2}
assert l == want, f"layout {l} != {want}"
assert out["span_rms"] > 0, out
sizes = {"source.rgb": 20 * 14 * 3, "letterbox.rgb": 20 * 14 * 3, "patches.f32": 70 * 12 * 4,
         "span.f32": 17 * 64 * 4}
for name, n in sizes.items():
    got = os.path.getsize(os.path.join(sys.argv[2], name))
    assert got == n, f"{name}: {got} bytes, want {n}"
assert json.load(open(os.path.join(sys.argv[2], "layout.json"))) == want
PY

expect_fail() {  # expect_fail CODE NEEDLE CMD...
  local code="$1" needle="$2"; shift 2
  set +e
  "$@" >/dev/null 2>"$work/err.txt"
  local rc=$?
  set -e
  [ "$rc" -eq "$code" ] || { echo "exit $rc (want $code): $*"; exit 1; }
  [ "$(wc -l < "$work/err.txt")" -eq 1 ] || { echo "not one line: $(cat "$work/err.txt")"; exit 1; }
  grep -qF -- "$needle" "$work/err.txt" || { echo "error lacks '$needle': $(cat "$work/err.txt")"; exit 1; }
}
printf 'not an image' > "$work/bad.png"
expect_fail 1 "unknown format" "$dsv41" image --model "$work/model" --file "$work/bad.png"
expect_fail 1 "cannot open" "$dsv41" image --model "$work/model" --file "$work/missing.png"
expect_fail 2 "--file" "$dsv41" image --model "$work/model"
expect_fail 1 "vision.patch_embed.proj.weight" \
  "$dsv41" image --model "$fixtures/golden/tiny8" --file "$work/img.png" --encode
# `dsv41 generate --image`: the placeholder id (599 here) becomes the 17-position span.
cp "$fixtures/golden/tiny8/tokenizer.json" "$work/model/"
"$dsv41" generate --model "$work/model" --ids 0,5,599,7 --image "$work/img.png" --max-tokens 3 \
  --ignore-eos >/dev/null 2>"$work/gen.txt"
grep -qF "prompt 20 tokens, completion 3 tokens" "$work/gen.txt" || {
  echo "generate --image: $(cat "$work/gen.txt")"; exit 1; }
expect_fail 2 "exactly one image placeholder" \
  "$dsv41" generate --model "$work/model" --ids 0,5,7 --image "$work/img.png"
expect_fail 1 "unknown format" \
  "$dsv41" generate --model "$work/model" --ids 0,599 --image "$work/bad.png"
echo "dsv41 image: ok"
