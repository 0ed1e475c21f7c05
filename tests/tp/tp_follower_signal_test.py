#!/usr/bin/env python3
"""[tp] A follower (dsv41-server --rank 1) still connecting to a rank 0 that never comes stops
promptly on SIGTERM and on SIGINT (< 2 s, exit 0, a message saying why), instead of retrying
until --tp-connect-timeout-ms. Usage: tp_follower_signal_test.py SERVER MODEL_DIR"""
import signal
import socket
import subprocess
import sys
import threading
import time

SERVER, MODEL = sys.argv[1], sys.argv[2]
EXPECT = "TP follower stopped by signal before the link to rank 0 was up"


def unused_port():
    # Bound then closed without listen(): nobody accepts there, so the follower keeps retrying.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(sig):
    args = [SERVER, "--model", MODEL, "--threads", "1", "--rank", "1",
            "--peer", f"127.0.0.1:{unused_port()}", "--tp-bind", "127.0.0.2",
            "--tp-connect-timeout-ms", "60000"]
    p = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    log, connecting = [], threading.Event()

    def read():
        for line in p.stderr:
            log.append(line)
            if "connecting to rank 0" in line:
                connecting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert connecting.wait(30), "follower never started connecting:\n" + "".join(log)
        time.sleep(1.0)  # inside the connect retry loop (refused every 100 ms)
        assert p.poll() is None, "follower exited before the signal:\n" + "".join(log)
        t0 = time.monotonic()
        p.send_signal(sig)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{signal.Signals(sig).name}: follower still running 10 s after "
                                 "the signal:\n" + "".join(log))
        took = time.monotonic() - t0
        reader.join(5)
        text = "".join(log)
        print(f"{signal.Signals(sig).name}: exit {rc} after {took:.2f} s", flush=True)
        assert took < 2.0, f"follower took {took:.2f} s to exit (limit 2 s):\n{text}"
        assert rc == 0, f"follower exit status {rc} (expected 0):\n{text}"
        assert EXPECT in text, f"missing message '{EXPECT}':\n{text}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    run(signal.SIGTERM)
    run(signal.SIGINT)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
