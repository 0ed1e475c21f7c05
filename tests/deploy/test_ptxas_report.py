#!/usr/bin/env python3
"""scripts/ptxas-report.py: the ptxas log parser on a canned log, the refusals (no compile database,
a file not in it, an ambiguous suffix, a failing compile command), and, where nvcc is on PATH or
in /usr/local/cuda/bin, one real report of a tiny kernel (skipped with a message otherwise).

    test_ptxas_report.py PTXAS_REPORT_PY
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.abspath(sys.argv[1])
spec = importlib.util.spec_from_file_location("ptxas_report", SCRIPT)
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'
ptxas info    : Function properties for _Z3fooPf
    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 8 bytes cumulative stack size, 2944 bytes smem
ptxas info    : Compiling entry function '_Z3barv' for 'sm_121'
ptxas info    : Used 32 registers, used 0 barriers
"""


def run(*args, cwd=None):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          cwd=cwd)


def write_db(build, entries):
    os.makedirs(build, exist_ok=True)
    with open(os.path.join(build, "compile_commands.json"), "w") as f:
        json.dump(entries, f)


class Parse(unittest.TestCase):
    def test_canned_log(self):
        k = report.parse(LOG)
        self.assertEqual(len(k), 2, k)
        self.assertEqual((k[0]["name"], k[0]["arch"], k[0]["regs"]), ("_Z3fooPf", "sm_90", 64))
        self.assertEqual((k[0]["spill_stores"], k[0]["spill_loads"], k[0]["smem"]), (12, 16, 2944))
        # No "Function properties" line: no spills, no smem figure.
        self.assertEqual((k[1]["arch"], k[1]["regs"], k[1]["spill_stores"], k[1]["smem"]),
                         ("sm_121", 32, 0, 0))

    def test_output_flag_dropped(self):
        cmd = report.verbose_command({"command": "nvcc -c a.cu -o a.o -O3"}, "/tmp/x.o")
        self.assertEqual(cmd, ["nvcc", "-c", "a.cu", "-O3", "-o", "/tmp/x.o", "-Xptxas", "-v"])


class Refusals(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_no_database(self):
        r = run("--build", os.path.join(self.tmp, "none"), "a.cu")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("compile_commands.json", r.stderr)

    def test_file_not_in_database(self):
        build = os.path.join(self.tmp, "b")
        write_db(build, [{"directory": self.tmp, "file": "/src/k/a.cu", "command": "true"}])
        r = run("--build", build, "zz.cu")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("zz.cu: not in the compile database", r.stderr)

    def test_ambiguous_suffix(self):
        build = os.path.join(self.tmp, "b")
        write_db(build, [{"directory": self.tmp, "file": "/src/x/gemv.cu", "command": "true"},
                         {"directory": self.tmp, "file": "/src/y/gemv.cu", "command": "true"},
                         {"directory": self.tmp, "file": "/src/y/exl3_gemv.cu", "command": "true"}])
        r = run("--build", build, "gemv.cu")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("matches several sources", r.stderr)
        self.assertNotIn("exl3_gemv.cu", r.stderr)  # whole path components only

    def test_compile_failure(self):
        build = os.path.join(self.tmp, "b")
        write_db(build, [{"directory": self.tmp, "file": "/src/a.cu",
                          "command": "sh -c 'echo broken >&2; exit 3'"}])
        r = run("--build", build, "a.cu")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("compile failed (exit 3)", r.stderr)


class RealReport(unittest.TestCase):
    def test_tiny_kernel(self):
        nvcc = shutil.which("nvcc") or (
            "/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)
        if nvcc is None:
            print("SKIP: no nvcc (PATH, /usr/local/cuda/bin): real ptxas report not checked",
                  file=sys.stderr)
            return
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "tiny.cu")
            with open(src, "w") as f:
                f.write("__global__ void scale(float* p, float s) { p[threadIdx.x] *= s; }\n")
            build = os.path.join(tmp, "b")
            write_db(build, [{"directory": tmp, "file": src,
                              "command": f"{nvcc} -arch=sm_90 -c {src} -o {tmp}/tiny.o"}])
            r = run("--build", build, "tiny.cu")
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = [l for l in r.stdout.splitlines() if l.startswith("sm_90")]
            self.assertEqual(len(rows), 1, r.stdout)
            self.assertIn("scale(float*, float)" if shutil.which("c++filt") else "scale",
                          rows[0])
            self.assertGreater(int(rows[0].split()[1]), 0, rows[0])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
