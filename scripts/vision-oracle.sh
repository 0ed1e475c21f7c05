#!/usr/bin/env bash
# The vision path against the reference libraries, on a machine with Python torch + Pillow (the
# lent GPU machine; docs/vision.md "Oracle run"): builds `dsv41` and dsv41_make_synthetic, writes
# synthetic checkpoints with a vision tower, draws images with Pillow (PNG RGB / grey / palette /
# RGBA, JPEG baseline / progressive / grey, GIF palette / transparent with a wider screen /
# animated, WebP lossless / lossy / alpha / animated; sizes from tiny to over the token budget),
# dumps every stage with `dsv41 image --encode --dump` and checks it with
# tools/oracle/vision_oracle.py.
# Environment:
#   TOWER       the reference tower module (default .oracle/nemo_deepseek_v4_vision.py, carried)
#   REAL=1      also one image through a tower of the released dimensions (32 blocks x 1024)
#   BUILD_DIR, JOBS, DEPS_PREFIX as scripts/gpu-build.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build-gpu}"
tower="${TOWER:-.oracle/nemo_deepseek_v4_vision.py}"
[ -f "$tower" ] || { echo "vision-oracle.sh: no reference tower module at $tower" >&2; exit 1; }
scripts/gpu-build.sh dsv41_cli dsv41_make_synthetic
work="${WORK:-/tmp/dsv41-vision-oracle}"
rm -rf "$work"
mkdir -p "$work/img"
"$build/bench/dsv41_make_synthetic" "$work/tiny" --tiny --vision >/dev/null
python3 - "$work/img" <<'PY'
import sys
import numpy as np
from PIL import Image
out = sys.argv[1]
rng = np.random.default_rng(7)
def noise(w, h):
    x = np.linspace(0, 255, w)[None, :, None] * 0.5 + rng.integers(0, 128, (h, w, 3))
    return Image.fromarray(x.clip(0, 255).astype(np.uint8), "RGB")
noise(20, 14).save(f"{out}/rgb_20x14.png")
noise(9, 31).save(f"{out}/rgb_9x31.png")
noise(700, 300).save(f"{out}/rgb_700x300.png")
noise(1000, 1000).save(f"{out}/rgb_1000x1000.png")
noise(37, 1200).save(f"{out}/rgb_37x1200.png")
noise(64, 48).convert("L").save(f"{out}/grey_64x48.png")
noise(64, 48).convert("P", palette=Image.ADAPTIVE, colors=16).save(f"{out}/palette_64x48.png")
noise(50, 40).convert("RGBA").save(f"{out}/rgba_50x40.png")
noise(123, 77).save(f"{out}/baseline_123x77.jpg", quality=90)
noise(123, 77).save(f"{out}/progressive_123x77.jpg", quality=75, progressive=True)
noise(80, 60).convert("L").save(f"{out}/grey_80x60.jpg", quality=85)
# GIF: a palette image; one with a transparent index whose logical screen was widened by hand
# (bytes 6-9), so the canvas outside the first frame shows Pillow's fill; an animation.
pal = noise(40, 30).convert("P", palette=Image.ADAPTIVE, colors=8)
pal.save(f"{out}/palette_40x30.gif")
pal.save(f"{out}/transparent.gif", transparency=2)
b = bytearray(open(f"{out}/transparent.gif", "rb").read())
b[6:10] = (52).to_bytes(2, "little") + (37).to_bytes(2, "little")
open(f"{out}/screen_wider_52x37.gif", "wb").write(bytes(b))
frames = [noise(24, 18).convert("P", palette=Image.ADAPTIVE, colors=16) for _ in range(3)]
frames[0].save(f"{out}/animated_24x18.gif", save_all=True, append_images=frames[1:], duration=80)
# WebP (when this Pillow has it): lossless, lossy, with alpha, animated.
from PIL import features
if features.check("webp"):
    noise(45, 33).save(f"{out}/lossless_45x33.webp", lossless=True)
    noise(45, 33).save(f"{out}/lossy_45x33.webp", quality=70)
    noise(30, 20).convert("RGBA").save(f"{out}/rgba_30x20.webp", lossless=True, exact=True)
    noise(26, 21).save(f"{out}/animated_26x21.webp", save_all=True,
                       append_images=[noise(26, 21)], duration=100, lossless=True)
else:
    print("vision-oracle.sh: this Pillow has no WebP support: WebP not checked")
PY
fail=0
check() {  # check MODEL IMAGE
  local name dump
  name="$(basename "$2")"
  dump="$work/dump-$(basename "$1")-$name"
  echo "== $(basename "$1") $name"
  "$build/tools/dsv41/dsv41" image --model "$1" --file "$2" --encode --dump "$dump"
  python3 tools/oracle/vision_oracle.py --model "$1" --image "$2" --dump "$dump" \
    --tower "$tower" || fail=1
}
for f in "$work"/img/*; do check "$work/tiny" "$f"; done
if [ "${REAL:-0}" = "1" ]; then
  "$build/bench/dsv41_make_synthetic" "$work/real" --layers 4 --experts 2 --vision >/dev/null
  check "$work/real" "$work/img/rgb_700x300.png"
fi
[ "$fail" = 0 ] && echo "vision-oracle.sh: all checks passed" || echo "vision-oracle.sh: FAILURES"
exit "$fail"
