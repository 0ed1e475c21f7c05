#!/usr/bin/env python3
"""Checks `dsv41 image --encode --dump` against the reference libraries (docs/vision.md).

Needs numpy, torch and Pillow (the lent GPU machine has them; PyPI is not reachable here) and the
reference vision tower module (NeMo Automodel's deepseek_v4/vision.py, fetched and kept out of
git under .oracle/). Compares, for one image file:
  1. decoding: PIL Image.open(f).convert("RGB") vs source.rgb            (bit for bit)
  2. letterbox: PIL ImageOps.pad(image, size, color=(127,)*3) or, in the max_wh_ratio case,
     image.resize(size) vs letterbox.rgb                                  (bit for bit)
  3. patches: x/255, (x - 0.5)/0.5 in float32, to bfloat16, cut (c, y, x)  (bit for bit)
  4. the tower: the reference ViT + aligner in float32 on the model's weights, our patches as
     input, delimiters from the checkpoint, vs span.f32                   (max |diff| / rms)
Prints one line per check and exits 1 when any fails.
usage: vision_oracle.py --model DIR --image FILE --dump DIR --tower PY [--tol 1e-3]
"""
import argparse
import importlib.util
import json
import os
import struct
import sys
import types

import numpy as np
import torch
from PIL import Image, ImageOps


def stub_reference_imports():
    """The tower module imports its config class and a dtype helper from its package."""
    for name in ["nemo_automodel", "nemo_automodel.components", "nemo_automodel.components.models",
                 "nemo_automodel.components.models.deepseek_v4", "nemo_automodel.shared"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    cfg = types.ModuleType("nemo_automodel.components.models.deepseek_v4.config")
    cfg.DeepseekV4Config = object
    utils = types.ModuleType("nemo_automodel.shared.utils")
    utils.dtype_from_str = lambda s, default=None: torch.float32
    sys.modules[cfg.__name__] = cfg
    sys.modules[utils.__name__] = utils


def shim_old_torch():
    """Torch < 2.0 (Debian 12's 1.13) has no F.scaled_dot_product_attention: its definition
    without mask or dropout, softmax(q kᵀ / sqrt(d)) v, in the inputs' dtype."""
    import torch.nn.functional as F
    if hasattr(F, "scaled_dot_product_attention"):
        return

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        assert attn_mask is None and dropout_p == 0.0 and not is_causal
        s = scale if scale is not None else 1.0 / (q.shape[-1] ** 0.5)
        return torch.softmax(q @ k.transpose(-2, -1) * s, dim=-1) @ v
    F.scaled_dot_product_attention = sdpa


def load_module(path):
    stub_reference_imports()
    shim_old_torch()
    spec = importlib.util.spec_from_file_location("reference_vision", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


DTYPES = {"BF16": (torch.bfloat16, 2), "F32": (torch.float32, 4), "F16": (torch.float16, 2)}


def read_tensors(model_dir, wanted):
    """The named tensors from the checkpoint's shards, as float32 torch tensors."""
    index = json.load(open(os.path.join(model_dir, "model.safetensors.index.json")))["weight_map"]
    out = {}
    by_file = {}
    for name in wanted:
        by_file.setdefault(index[name], []).append(name)
    for fname, names in by_file.items():
        with open(os.path.join(model_dir, fname), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            for name in names:
                t = header[name]
                dtype, width = DTYPES[t["dtype"]]
                begin, end = t["data_offsets"]
                f.seek(8 + n + begin)
                raw = bytearray(f.read(end - begin))
                out[name] = torch.frombuffer(raw, dtype=dtype).reshape(t["shape"]).float()
    return out


def report(name, ok, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--tower", required=True, help="the reference vision tower module (.py)")
    ap.add_argument("--tol", type=float, default=1e-3, help="max |diff| / rms of the span rows")
    a = ap.parse_args()
    layout = json.load(open(os.path.join(a.dump, "layout.json")))
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    vc = cfg["vision_config"]
    W, H = layout["size"]
    p = layout["patch_size"]
    ok = True

    image = Image.open(a.image).convert("RGB")
    src = np.fromfile(os.path.join(a.dump, "source.rgb"), dtype=np.uint8)
    ref = np.asarray(image, dtype=np.uint8).reshape(-1)
    ok &= report("decode", src.shape == ref.shape and np.array_equal(src, ref),
                 f"{image.size[0]}x{image.size[1]}, "
                 f"{int(np.count_nonzero(src != ref)) if src.shape == ref.shape else 'size'} bytes differ")

    if layout["stretch"]:
        boxed = image.resize((W, H))
    else:
        boxed = ImageOps.pad(image, (W, H), color=(127, 127, 127))
    ours = np.fromfile(os.path.join(a.dump, "letterbox.rgb"), dtype=np.uint8)
    ref = np.asarray(boxed, dtype=np.uint8).reshape(-1)
    diff = np.abs(ours.astype(int) - ref.astype(int))
    ok &= report("letterbox", np.array_equal(ours, ref),
                 f"{W}x{H}, {int(np.count_nonzero(diff))} bytes differ, max {int(diff.max())}")

    x = torch.from_numpy(np.asarray(boxed, dtype=np.float32)).permute(2, 0, 1) / 255
    x = ((x - 0.5) / 0.5).to(torch.bfloat16)
    vh, vw = H // p, W // p
    patches = x.reshape(3, vh, p, vw, p).permute(1, 3, 0, 2, 4).reshape(vh * vw, 3, p, p)
    ours = np.fromfile(os.path.join(a.dump, "patches.f32"), dtype=np.float32)
    ref = patches.float().reshape(-1).numpy()
    ok &= report("patches", np.array_equal(ours, ref),
                 f"{vh}x{vw} patches, {int(np.count_nonzero(ours != ref))} values differ")

    span_path = os.path.join(a.dump, "span.f32")
    if os.path.exists(span_path):
        mod = load_module(a.tower)
        conf = types.SimpleNamespace(
            vision_dim=vc["hidden_size"], vision_n_heads=vc["num_attention_heads"],
            vision_inter_dim=vc["intermediate_size"], vision_n_layers=vc["num_hidden_layers"],
            vision_patch_size=vc["patch_size"], vision_downsample_ratio=vc["downsample_ratio"],
            vision_rope_theta=vc.get("rope_theta", 10000.0),
            hidden_size=cfg["text_config"]["hidden_size"], torch_dtype="float32")
        vit = mod.DeepseekV4VisionTransformer(conf)
        aligner = mod.DeepseekV4VisionAligner(conf)
        names = [k for k in json.load(open(os.path.join(a.model, "model.safetensors.index.json")))
                 ["weight_map"] if k.startswith(("vision.", "aligner.", "image_"))]
        t = read_tensors(a.model, names)
        vit.load_state_dict({k[len("vision."):]: v for k, v in t.items() if k.startswith("vision.")})
        aligner.load_state_dict({k[len("aligner."):]: v for k, v in t.items()
                                 if k.startswith("aligner.")})
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        torch.backends.cuda.matmul.allow_tf32 = False  # a float32 oracle, not TF32
        torch.backends.cudnn.allow_tf32 = False
        vit, aligner = vit.to(dev).float(), aligner.to(dev).float()
        with torch.no_grad():
            rows = aligner(vit(patches.float().to(dev), vh, vw), vh, vw).cpu()
        lh, lw = layout["llm_grid"]
        parts = [t["image_start"][None]]
        for r in range(lh):
            parts += [rows[r * lw:(r + 1) * lw], t["image_newline"][None]]
        parts.append(t["image_end"][None])
        ref = torch.cat(parts).reshape(-1).numpy()
        ours = np.fromfile(span_path, dtype=np.float32)
        if ours.shape != ref.shape:
            ok &= report("tower", False, f"{ours.size} span values, reference {ref.size}")
        else:
            rms = float(np.sqrt(np.mean(ref.astype(np.float64) ** 2)))
            worst = float(np.max(np.abs(ours.astype(np.float64) - ref)))
            ok &= report("tower", worst <= a.tol * rms,
                         f"{layout['positions']} x {conf.hidden_size}, max |diff| {worst:.3g} = "
                         f"{worst / rms:.3g} rms (tolerance {a.tol} rms), on {dev}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
