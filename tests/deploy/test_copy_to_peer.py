"""Black-box tests of scripts/copy-to-peer.sh: rsync to a "worker" reached through
tests/deploy/fake_ssh.sh (the remote side runs locally in a temporary home).

    test_copy_to_peer.py COPY_TO_PEER_SH
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/deploy/checks.py (the script's own folder)

SCRIPT = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_model(root):
    files = {
        "config.json": b'{"model_type": "deepseek_v4"}\n',
        "model-00001-of-00002.safetensors": os.urandom(300_000),
        "model-00002-of-00002.safetensors": os.urandom(200_000),
        "exl3/bank/K3/L02.part.safetensors": os.urandom(50_000),  # ".part." is not a piece
    }
    for name, data in files.items():
        write(os.path.join(root, name), data)
    with open(os.path.join(root, "sha256-manifest.txt"), "w") as f:
        for name, data in files.items():
            if name != "config.json":
                f.write(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
    # Download leftovers that must stay on the head.
    write(os.path.join(root, "model-00003.safetensors.part00"), b"piece")
    write(os.path.join(root, ".dsv41-download", "config.json.sha256"), b"stamp")
    return files


def run(env, **extra):
    e = dict(env)
    e.update(extra)
    p = subprocess.run(["bash", SCRIPT], env=e, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="dsv41-copy-")
    try:
        src, home = os.path.join(tmp, "head-model"), os.path.join(tmp, "worker-home")
        dst = os.path.join(tmp, "worker-disk", "models", "m")
        os.makedirs(home)
        files = make_model(src)
        env = dict(os.environ, WORKER="tester@worker", SSH=os.path.join(HERE, "fake_ssh.sh"),
                   FAKE_SSH_HOME=home, MODEL_DIR=src, WORKER_MODEL_DIR=dst)

        rc, out, err = run(env)
        same = all(os.path.exists(os.path.join(dst, n)) and
                   open(os.path.join(dst, n), "rb").read() == d for n, d in files.items())
        check(rc == 0 and same, "copy: every model file arrives byte-identical", out + err)
        check(not os.path.exists(os.path.join(dst, "model-00003.safetensors.part00"))
              and not os.path.exists(os.path.join(dst, ".dsv41-download")),
              "download leftovers (pieces, stamps) are not copied")

        rc, out, err = run(env)
        check(rc == 0 and "Number of regular files transferred: 0" in out,
              "re-run sends nothing", out + err)

        extra = os.path.join(dst, "worker-only.txt")
        write(extra, b"keep me")
        rc, out, err = run(env, VERIFY="1")
        check(rc == 0 and "matches on tester@worker" in out and os.path.exists(extra),
              "VERIFY=1 passes on a good copy; worker-only files are kept", out + err)

        # An SSH session that drops during the verification (exit 255, no output) is a failure,
        # not "every file matches".
        flaky = os.path.join(tmp, "flaky_ssh.sh")
        with open(flaky, "w") as f:
            f.write('#!/bin/bash\n'
                    'if [ "${@: -1}" = "-s" ]; then script=$(cat)\n'
                    '  case "$script" in *"sha256sum -c"*) exit 255 ;; esac\n'
                    f'  exec {HERE}/fake_ssh.sh "$@" <<<"$script"; fi\n'
                    f'exec {HERE}/fake_ssh.sh "$@"\n')
        os.chmod(flaky, 0o755)
        rc, out, err = run(env, VERIFY="1", SSH=flaky)
        check(rc == 1 and "exit 255" in err and "matches" not in out,
              "VERIFY=1 with the SSH session dropping fails", out + err)

        # "~/x" is x in the worker user's home (not a directory named "~").
        rc, out, err = run(env, WORKER_MODEL_DIR="~/models/m2")
        check(rc == 0 and os.path.exists(os.path.join(home, "models", "m2", "config.json"))
              and not os.path.exists(os.path.join(home, "~")),
              "WORKER_MODEL_DIR=~/models/m2 lands in the worker's home", out + err)

        # Corrupt the worker's copy keeping size and mtime: rsync's quick check misses it, the
        # manifest check must not.
        victim = os.path.join(dst, "model-00002-of-00002.safetensors")
        st = os.stat(victim)
        with open(victim, "r+b") as f:
            f.seek(1000)
            f.write(b"\x00" * 16)
        os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
        rc, out, err = run(env, VERIFY="1")
        check(rc == 1 and "model-00002-of-00002.safetensors: FAILED" in err,
              "VERIFY=1 names a corrupted file on the worker", out + err)

        # Too little room on the worker (a df stub there reports 1000 bytes free).
        stubs = os.path.join(tmp, "stubs")
        os.makedirs(stubs)
        with open(os.path.join(stubs, "df"), "w") as f:
            f.write('#!/bin/sh\n[ "$FAKE_NODE" = worker ] && { echo Avail; echo 1000; exit 0; }\n'
                    'exec /bin/df "$@"\n')
        os.chmod(os.path.join(stubs, "df"), 0o755)
        rc, _, err = run(env, WORKER_MODEL_DIR=os.path.join(tmp, "fresh"),
                         PATH=stubs + os.pathsep + os.environ["PATH"])
        check(rc == 1 and "has 1000 bytes (0 GB) free" in err and "the copy needs 5503" in err
              and not os.path.exists(os.path.join(tmp, "fresh")),
              "too little free space on the worker: refused before copying", err)

        # Bad setups, each named.
        write(os.path.join(src, "model-00009.safetensors.incomplete"), b"half")
        rc, _, err = run(env)
        check(rc == 1 and "unfinished downloads" in err and ".incomplete" in err,
              "unfinished download refused", err)
        os.remove(os.path.join(src, "model-00009.safetensors.incomplete"))
        for extra_env, want, what in (
                ({"WORKER": ""}, "set WORKER", "missing WORKER"),
                ({"MODEL_DIR": tmp}, "has no config.json", "model dir without config.json"),
                ({"SSH": "false"}, "cannot reach the worker", "unreachable worker"),
                ({"VERIFY": "1", "MANIFEST": "nope.txt"}, "nope.txt does not exist",
                 "VERIFY=1 without a manifest"),
                ({"WORKER_MODEL_DIR": "~bob/m"}, "WORKER_MODEL_DIR=~bob/m",
                 "a ~user worker path")):
            rc, _, err = run(env, **extra_env)
            check(rc == 1 and want in err, f"refused with a message: {what}", err)
        p = subprocess.run(["bash", SCRIPT, "--help"], capture_output=True, text=True,
                           env=env, timeout=30)
        check(p.returncode == 0 and "WORKER_MODEL_DIR" in p.stdout,
              "--help prints the settings and copies nothing", p.stdout + p.stderr)
        p = subprocess.run(["bash", SCRIPT, "extra"], capture_output=True, text=True, env=env,
                           timeout=30)
        check(p.returncode == 2 and "no arguments" in p.stderr, "an argument is a usage error")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish("copy-to-peer")


if __name__ == "__main__":
    sys.exit(main())
