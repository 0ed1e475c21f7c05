"""Black-box tests of scripts/memguard.sh with a fake /proc/meminfo (MEMGUARD_MEMINFO) and
sleeping stand-ins for the serving processes.

    test_memguard.py MEMGUARD_SH
"""
import os
import subprocess
import sys
import tempfile
import time

from checks import check, finish  # tests/deploy/checks.py (the script's own folder)

GUARD = os.path.abspath(sys.argv[1])


def alive(p):
    return p.poll() is None


class Case:
    def __init__(self, tmp, available_kib):
        self.meminfo = os.path.join(tmp, "meminfo")
        self.log = os.path.join(tmp, "guard.log")
        self.set_available(available_kib)

    def set_available(self, kib):
        with open(self.meminfo + ".new", "w") as f:
            f.write(f"MemTotal:       131072000 kB\nMemFree:          100000 kB\n"
                    f"MemAvailable:   {kib} kB\n")
        os.replace(self.meminfo + ".new", self.meminfo)  # the guard never reads half a file

    def start(self, pidfiles, **env):
        e = dict(os.environ, MEMGUARD_MEMINFO=self.meminfo, MEMGUARD_LOG=self.log,
                 MEMGUARD_INTERVAL_S="0.1", MEMGUARD_GIB="1", MEMGUARD_KILL_AFTER_S="1")
        e.update(env)
        return subprocess.Popen(["bash", GUARD] + pidfiles, env=e, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def spawn(tmp, name, ignore_term=False):
    script = "trap '' TERM; while :; do sleep 0.1; done" if ignore_term else "exec sleep 600"
    p = subprocess.Popen(["bash", "-c", script])
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(f"{p.pid}\n")
    return p, path


def wait_exit(p, seconds):
    try:
        p.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_fires(tmp):
    c = Case(tmp, 8 * 1024 * 1024)  # 8 GiB available
    srv, pf = spawn(tmp, "r0.pid")
    stubborn, pf2 = spawn(tmp, "r1.pid", ignore_term=True)
    g = c.start([pf, pf2])
    time.sleep(1.0)
    check(alive(g) and alive(srv) and alive(stubborn), "above the threshold: nothing stopped")
    c.set_available(900 * 1024)  # 0.88 GiB < 1 GiB
    ok = wait_exit(g, 10)
    out, err = g.communicate() if ok else ("", "")
    check(ok and g.returncode == 0, "below the threshold: the guard fires and exits 0", err)
    check(wait_exit(srv, 2), "the server got SIGTERM")
    check(wait_exit(stubborn, 3), "a process ignoring SIGTERM is killed after the grace")
    log = open(c.log).read() if os.path.exists(c.log) else ""
    check("MemAvailable 900 MiB < 1 GiB" in log and "SIGKILL" in log and "fired" in log,
          "the log names the reading, the threshold and the SIGKILL", log)
    for p in (srv, stubborn):
        p.kill()


def test_single_dip_ignored(tmp):
    c = Case(tmp, 8 * 1024 * 1024)
    srv, pf = spawn(tmp, "r0.pid")
    g = c.start([pf], MEMGUARD_SAMPLES="50", MEMGUARD_INTERVAL_S="0.05")
    c.set_available(100 * 1024)  # one short dip (< 50 samples)
    time.sleep(0.5)
    c.set_available(8 * 1024 * 1024)
    time.sleep(3)
    check(alive(g) and alive(srv), "a dip shorter than MEMGUARD_SAMPLES samples does not fire")
    g.kill()
    srv.kill()


def test_exits_when_watched_gone(tmp):
    c = Case(tmp, 8 * 1024 * 1024)
    srv, pf = spawn(tmp, "r0.pid")
    g = c.start([pf])
    time.sleep(0.5)
    srv.kill()
    srv.wait()
    ok = wait_exit(g, 5)
    check(ok and g.returncode == 0, "exits 0 once every watched process is gone")
    if not ok:
        g.kill()


def test_bad_input(tmp):
    c = Case(tmp, 8 * 1024 * 1024)
    srv, pf = spawn(tmp, "r0.pid")
    nopid = os.path.join(tmp, "empty.pid")
    open(nopid, "w").close()
    nomem = os.path.join(tmp, "meminfo-bad")
    with open(nomem, "w") as f:
        f.write("MemTotal: 1 kB\n")
    cases = [
        ([], {}, "usage"),
        ([pf], {"MEMGUARD_GIB": "lots"}, "MEMGUARD_GIB='lots'"),
        ([pf], {"MEMGUARD_SAMPLES": "0"}, "MEMGUARD_SAMPLES='0'"),
        ([pf], {"MEMGUARD_INTERVAL_S": "-1"}, "MEMGUARD_INTERVAL_S='-1'"),
        ([os.path.join(tmp, "missing.pid")], {}, "missing.pid' is not readable"),
        ([nopid], {}, "holds no pid"),
        ([pf], {"MEMGUARD_MEMINFO": nomem}, "has no MemAvailable line"),
        ([pf], {"MEMGUARD_MEMINFO": os.path.join(tmp, "nope")}, "cannot read"),
    ]
    for args, env, want in cases:
        g = c.start(args, **env)
        ok = wait_exit(g, 5)
        _, err = g.communicate() if ok else ("", "")
        check(ok and g.returncode == 2 and want in err, f"bad input exits 2 naming it: {want}",
              err)
        if not ok:
            g.kill()
    check(alive(srv), "bad input never signals the watched process")
    srv.kill()


def main():
    for t in (test_fires, test_single_dip_ignored, test_exits_when_watched_gone, test_bad_input):
        print(f"== {t.__name__}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            t(tmp)
    return finish("memguard")


if __name__ == "__main__":
    sys.exit(main())
