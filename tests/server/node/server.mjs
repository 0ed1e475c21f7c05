// Starts dsv41-server on an ephemeral loopback port for the Node conformance tests.
// Env: DSV41_SERVER_BIN (the binary), DSV41_MODEL_DIR (the tiny model).
import { spawn } from "node:child_process";

export const KEY = "node-test-key-0123456789";
export const MODEL = "deepseek-v4.1-flash";

export async function startServer(...flags) {
  const bin = process.env.DSV41_SERVER_BIN;
  const model = process.env.DSV41_MODEL_DIR;
  if (!bin || !model) throw new Error("set DSV41_SERVER_BIN and DSV41_MODEL_DIR");
  const proc = spawn(bin, ["--model", model, "--host", "127.0.0.1", "--port", "0", "--threads",
                           "1", "--api-key", KEY, "--max-context", "2048", ...flags],
                     { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not listen:\n" + log)), 120000);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on("exit", (code) => reject(new Error(`server exited (${code}):\n${log}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120000;
  for (;;) {
    try {
      if ((await fetch(base + "/health")).status === 200) break;
    } catch {}
    if (Date.now() > deadline) throw new Error("server never became healthy:\n" + log);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    base, url: base + "/v1", log: () => log,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const done = new Promise((r) => proc.on("exit", (c) => r(c)));
      proc.kill("SIGTERM");
      return done;
    },
  };
}
