#!/usr/bin/env python3
"""Registers, spills and shared memory of every kernel in CUDA sources, per architecture, with no
GPU: each file's compile command from the build's compile_commands.json is rerun with
`-Xptxas -v` into a temporary object and ptxas's report is tabulated (kernel names demangled
when c++filt is on PATH).

    scripts/ptxas-report.py [--build DIR] [--spills] [--match TEXT] FILE...

  FILE        a .cu file of the build (path relative to the repository, or any unique suffix)
  --build     build directory holding compile_commands.json (default: build)
  --spills    only kernels that spill
  --match     only kernels whose demangled name contains TEXT

Exit status: 0 report printed, 1 a compile failed (its stderr tail printed), 2 bad arguments
(no compile database, a file not in it or matched by several entries).
Why: a register cap (__launch_bounds__) that makes ptxas spill in a hot GEMV instance costs more
than the change it came with (docs/perf.md stop 21); ninja prints ptxas warnings only for files
it rebuilds, and not per architecture.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")


def parse(log):
    """ptxas -v output -> [{name, arch, regs, spill_stores, spill_loads, smem, stack}] in order.

    ptxas prints, per entry function: "Compiling entry function 'X' for 'sm_NN'", then "Function
    properties for X" with the stack/spill line, then "Used N registers, ... M bytes smem".
    """
    kernels, cur, spill = [], None, None
    for line in log.splitlines():
        m = ENTRY.search(line)
        if m:
            cur, spill = (m.group(1), m.group(2)), None
            continue
        m = SPILL.search(line)
        if m and cur is not None:
            spill = tuple(int(g) for g in m.groups())
            continue
        m = USED.search(line)
        if m and cur is not None:
            stack, stores, loads = spill if spill is not None else (0, 0, 0)
            kernels.append({"name": cur[0], "arch": cur[1], "regs": int(m.group(1)),
                            "spill_stores": stores, "spill_loads": loads,
                            "smem": int(m.group(2) or 0), "stack": stack})
            cur = None
    return kernels


def demangle(names):
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return list(names)
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    lines = out.stdout.splitlines()
    return lines if len(lines) == len(names) else list(names)


def find_entry(db, wanted):
    """The database entry of `wanted`: the same path, or a path ending in /wanted."""
    w = os.path.normpath(wanted)
    hits = [e for e in db
            if os.path.normpath(e["file"]) == w or os.path.normpath(e["file"]).endswith(os.sep + w)]
    if not hits:
        raise LookupError(f"{wanted}: not in the compile database (a CUDA source of the build?)")
    if len({e["file"] for e in hits}) > 1:
        files = ", ".join(sorted({e["file"] for e in hits}))
        raise LookupError(f"{wanted}: matches several sources ({files}); give a longer path")
    return hits[0]


def verbose_command(entry, obj):
    """The entry's command with its output redirected to obj and ptxas made verbose."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a.startswith("-o") and len(a) > 2 and not a.startswith("-opt"):
            continue
        out.append(a)
    return out + ["-o", obj, "-Xptxas", "-v"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--spills", action="store_true")
    ap.add_argument("--match", default="")
    ap.add_argument("files", nargs="+")
    opt = ap.parse_args()
    db_path = os.path.join(opt.build, "compile_commands.json")
    try:
        with open(db_path) as f:
            db = json.load(f)
    except (OSError, ValueError) as e:
        print(f"ptxas-report: cannot read {db_path}: {e} (configure the build first)",
              file=sys.stderr)
        return 2
    try:
        entries = [find_entry(db, w) for w in opt.files]
    except LookupError as e:
        print(f"ptxas-report: {e}", file=sys.stderr)
        return 2
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for wanted, entry in zip(opt.files, entries):
            cmd = verbose_command(entry, os.path.join(tmp, "report.o"))
            run = subprocess.run(cmd, cwd=entry.get("directory", "."), capture_output=True,
                                 text=True)
            if run.returncode != 0:
                print(f"ptxas-report: {wanted}: compile failed (exit {run.returncode}):",
                      file=sys.stderr)
                print("\n".join(run.stderr.splitlines()[-20:]), file=sys.stderr)
                status = 1
                continue
            kernels = parse(run.stderr)
            names = demangle([k["name"] for k in kernels])
            print(f"== {entry['file']}")
            print(f"{'arch':7} {'regs':>4} {'spill st/ld':>11} {'smem':>6}  kernel")
            for k, name in zip(kernels, names):
                if opt.spills and k["spill_stores"] == 0 and k["spill_loads"] == 0:
                    continue
                if opt.match and opt.match not in name:
                    continue
                spill = f"{k['spill_stores']}/{k['spill_loads']}"
                print(f"{k['arch']:7} {k['regs']:>4} {spill:>11} {k['smem']:>6}  {name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
