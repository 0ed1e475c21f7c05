#!/usr/bin/env python3
"""Pillow as the oracle of the image front end (docs/vision.md; ctest golden:vision_pillow_oracle).

The reference serving stack reads an image with `PIL.Image.open(f).convert("RGB")`, letterboxes it
with `ImageOps.pad(image, size, color=(127, 127, 127))` (or `image.resize(size)` when the aspect
cap stretches it) and cuts bf16 patches of (x / 255 - 0.5) / 0.5. This test draws images with
Pillow in every format and mode the decoder claims (PNG RGB / grey / 16-bit grey / palette /
palette + transparency / RGBA / grey + alpha / interlaced / 16-bit RGB, RGBA and grey + alpha, JPEG baseline / progressive / grey,
GIF palette / transparent index on a widened screen / animated, WebP lossless / lossy / alpha /
animated), runs `dsv41 image --dump` on each, and requires source.rgb, letterbox.rgb and
patches.f32 to equal Pillow's bit for bit.

Runs with the system python (Debian python3-pil, python3-numpy; scripts/setup.sh installs them);
without Pillow it prints SKIP and passes.
usage: pillow_oracle_test.py DSV41 MAKE_SYNTHETIC
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
    from PIL import Image, ImageOps, features
except ImportError as e:  # noqa: F841
    print(f"SKIP golden:vision_pillow_oracle: Pillow / numpy not importable ({e}); "
          "install python3-pil python3-numpy")
    sys.exit(0)

DSV41, MAKE_SYNTHETIC = sys.argv[1:3]


def noise(rng, w, h):
    x = np.linspace(0, 255, w)[None, :, None] * 0.5 + rng.integers(0, 128, (h, w, 3))
    return Image.fromarray(x.clip(0, 255).astype(np.uint8), "RGB")


def raw_png(path, w, h, color_type, channels, rng):
    """A 16-bit PNG written byte by byte (Pillow writes no 16-bit colour PNGs)."""
    samples = rng.integers(0, 65536, (h, w * channels), dtype=np.uint32).astype(">u2")
    raw = b"".join(b"\0" + samples[y].tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" +
                          chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0)) +
                          chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def draw(out):
    rng = np.random.default_rng(7)
    files = []

    def save(img, name, **kw):
        path = os.path.join(out, name)
        img.save(path, **kw)
        files.append(path)

    save(noise(rng, 20, 14), "rgb_20x14.png")
    save(noise(rng, 700, 300), "rgb_700x300.png")
    save(noise(rng, 9, 31), "rgb_9x31.png")
    save(noise(rng, 64, 48).convert("L"), "grey_64x48.png")
    grey16 = (np.arange(40 * 30, dtype=np.uint32).reshape(30, 40) * 53) % 65536
    save(Image.fromarray(grey16.astype(np.uint16), "I;16"), "grey16_40x30.png")
    save(noise(rng, 64, 48).convert("P", palette=Image.ADAPTIVE, colors=16), "palette_64x48.png")
    save(noise(rng, 33, 21).convert("P", palette=Image.ADAPTIVE, colors=8), "palette_trns.png",
         transparency=3)
    save(noise(rng, 50, 40).convert("RGBA"), "rgba_50x40.png")
    save(noise(rng, 50, 40).convert("LA"), "la_50x40.png")
    save(noise(rng, 61, 47), "interlaced_61x47.png", interlace=1)
    for name, ctype, ch in (("rgb16_21x13.png", 2, 3), ("rgba16_21x13.png", 6, 4),
                            ("la16_21x13.png", 4, 2)):
        raw_png(os.path.join(out, name), 21, 13, ctype, ch, rng)
        files.append(os.path.join(out, name))
    save(noise(rng, 123, 77), "baseline_123x77.jpg", quality=90)
    save(noise(rng, 123, 77), "progressive_123x77.jpg", quality=75, progressive=True)
    save(noise(rng, 80, 60).convert("L"), "grey_80x60.jpg", quality=85)
    pal = noise(rng, 40, 30).convert("P", palette=Image.ADAPTIVE, colors=8)
    save(pal, "palette_40x30.gif")
    save(pal, "transparent.gif", transparency=2)
    wide = os.path.join(out, "screen_wider_52x37.gif")
    b = bytearray(open(os.path.join(out, "transparent.gif"), "rb").read())
    b[6:10] = (52).to_bytes(2, "little") + (37).to_bytes(2, "little")
    open(wide, "wb").write(bytes(b))
    files.append(wide)
    frames = [noise(rng, 24, 18).convert("P", palette=Image.ADAPTIVE, colors=16) for _ in range(3)]
    save(frames[0], "animated_24x18.gif", save_all=True, append_images=frames[1:], duration=80)
    if features.check("webp"):
        save(noise(rng, 45, 33), "lossless_45x33.webp", lossless=True)
        save(noise(rng, 45, 33), "lossy_45x33.webp", quality=70)
        save(noise(rng, 30, 20).convert("RGBA"), "rgba_30x20.webp", lossless=True, exact=True)
        save(noise(rng, 26, 21), "animated_26x21.webp", save_all=True,
             append_images=[noise(rng, 26, 21)], duration=100, lossless=True)
    else:
        print("this Pillow has no WebP support: WebP not checked")
    return files


def bf16(x):
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    u = x.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.view(np.float32)


def check(path, model, work):
    dump = os.path.join(work, "dump-" + os.path.basename(path))
    subprocess.run([DSV41, "image", "--model", model, "--file", path, "--dump", dump,
                    "--threads", "1"], check=True, stdout=subprocess.DEVNULL)
    layout = json.load(open(os.path.join(dump, "layout.json")))
    W, H = layout["size"]
    p = layout["patch_size"]
    failures = []
    image = Image.open(path).convert("RGB")
    src = np.fromfile(os.path.join(dump, "source.rgb"), dtype=np.uint8)
    ref = np.asarray(image, dtype=np.uint8).reshape(-1)
    if src.shape != ref.shape or not np.array_equal(src, ref):
        n = int(np.count_nonzero(src != ref)) if src.shape == ref.shape else "size"
        failures.append(f"decode: {n} bytes differ ({image.size[0]}x{image.size[1]})")
    boxed = image.resize((W, H)) if layout["stretch"] else ImageOps.pad(
        image, (W, H), color=(127, 127, 127))
    ours = np.fromfile(os.path.join(dump, "letterbox.rgb"), dtype=np.uint8)
    ref = np.asarray(boxed, dtype=np.uint8).reshape(-1)
    if not np.array_equal(ours, ref):
        failures.append(f"letterbox {W}x{H}: {int(np.count_nonzero(ours != ref))} bytes differ")
    x = np.asarray(boxed, dtype=np.float32).transpose(2, 0, 1) / np.float32(255)
    x = bf16((x - np.float32(0.5)) / np.float32(0.5))
    vh, vw = H // p, W // p
    patches = x.reshape(3, vh, p, vw, p).transpose(1, 3, 0, 2, 4).reshape(-1)
    ours = np.fromfile(os.path.join(dump, "patches.f32"), dtype=np.float32)
    if not np.array_equal(ours, patches):
        failures.append(f"patches: {int(np.count_nonzero(ours != patches))} values differ")
    print(f"{os.path.basename(path)}: {image.size[0]}x{image.size[1]} -> {W}x{H} "
          f"{'OK' if not failures else '; '.join(failures)}", flush=True)
    return not failures


def main():
    import PIL
    print(f"Pillow {PIL.__version__}, numpy {np.__version__}")
    work = tempfile.mkdtemp(prefix="dsv41-pillow-oracle-")
    try:
        model = os.path.join(work, "model")
        subprocess.run([MAKE_SYNTHETIC, model, "--tiny", "--vision"], check=True,
                       stdout=subprocess.DEVNULL)
        os.makedirs(os.path.join(work, "img"))
        ok = all([check(f, model, work) for f in draw(os.path.join(work, "img"))])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("pillow oracle: all equal" if ok else "pillow oracle: FAILURES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
