#!/usr/bin/env bash
# Issue 8's run, on one host with two GPUs (device kind nvidia-h200-x2 / nvidia-h100-x2): two
# rank processes, one GPU each (CUDA_VISIBLE_DEVICES), over the TCP link and over the NCCL data
# link (DSV41_TP_NCCL), on loopback addresses 127.0.0.1 / 127.0.0.2.
#   1. the kernel tier's TP tests (one GPU part);
#   2. tiny8's golden prompts (prefill, chunks, decode, fork + rollback) through Session with the
#      CUDA backend: one process vs the two ranks over TCP and over NCCL (max |diff| <= 2e-3,
#      the same argmax on every row: the CUDA-vs-CPU bound of the kernel tier);
#   3. the collectives alone (dsv41_bench_tp_allreduce, TCP and NCCL);
#   4. the synthetic full-geometry model (40 layers, 32 experts) through Session: one GPU vs the
#      two ranks over TCP and NCCL: prefill tok/s, decode ms/token, 6-row verify.
# Environment: BUILD_DIR (build-gpu), JOBS, DEPS_PREFIX (as scripts/gpu-build.sh), SYN (the
# synthetic checkpoint directory, /tmp/syn; written when missing), PROMPT (2048), STEPS (32),
# SKIP_FULL=1 (steps 1-3 only).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build-gpu}"
syn="${SYN:-/tmp/syn}"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
[ "$gpus" -ge 2 ] || {
  echo "gpu-tp-test.sh: needs two GPUs, nvidia-smi lists ${gpus:-none}" >&2
  exit 1
}
if [ -n "${DEPS_PREFIX:-}" ]; then
  DEPS_PREFIX="$(cd "$DEPS_PREFIX" && pwd)"
  export DEPS_PREFIX LD_LIBRARY_PATH="$DEPS_PREFIX/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
export BUILD_DIR="$build"
scripts/gpu-build.sh test_kernel_tp dsv41_tp_logits dsv41_bench_session dsv41_bench_tp_allreduce \
  dsv41_make_synthetic
# NCCL's bootstrap on loopback (the lent machines have no other network).
export NCCL_SOCKET_IFNAME=lo DSV41_BACKEND=cuda
logits="$build/tests/tp/dsv41_tp_logits"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
port=29700

# Runs "$@ <rank args>" as rank 1 on GPU 1 (background) and rank 0 on GPU 0, then waits for both.
pair() {
  local nccl="$1" r0_args="$2" r1_args="$3"
  shift 3
  port=$((port + 1))
  # shellcheck disable=SC2086 # the rank args are word lists
  CUDA_VISIBLE_DEVICES=1 DSV41_TP_NCCL="$nccl" "$@" $r1_args 1 127.0.0.2 127.0.0.1 "$port" \
    >"$tmp/r1.log" 2>&1 &
  local r1=$!
  local rc=0
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=0 DSV41_TP_NCCL="$nccl" "$@" $r0_args 0 127.0.0.1 127.0.0.2 "$port" || rc=$?
  wait "$r1" || {
    echo "rank 1 failed:" >&2
    cat "$tmp/r1.log" >&2
    rc=1
  }
  return "$rc"
}

echo "== 1. kernel-tier TP tests (one GPU)"
status=0
ctest --test-dir "$build" -L kernel -R tp --output-on-failure --timeout 900 || status=1

echo "== 2. tiny8 logits: one process vs two ranks"
model="$root/tests/fixtures/golden/tiny8"
CUDA_VISIBLE_DEVICES=0 "$logits" "$model" "$tmp/one.bin"
vocab="$(grep -o '"vocab_size": *[0-9]*' "$model/config.json" | head -n 1 | grep -o '[0-9]*$')"
for nccl in 0 1; do
  echo "-- DSV41_TP_NCCL=$nccl"
  pair "$nccl" "$tmp/two$nccl.bin" "$tmp/follower$nccl.bin" "$logits" "$model" || status=1
  "$logits" --compare "$tmp/one.bin" "$tmp/two$nccl.bin" "$vocab" 2e-3 || status=1
done

echo "== 3. the collectives alone"
for link in tcp nccl; do
  pair "$([ "$link" = nccl ] && echo 1 || echo 0)" "" "" \
    "$build/bench/dsv41_bench_tp_allreduce" "$link" || status=1
done

if [ "${SKIP_FULL:-0}" != 1 ]; then
  echo "== 4. synthetic full geometry through Session"
  [ -f "$syn/config.json" ] ||
    "$build/bench/dsv41_make_synthetic" "$syn" --layers 40 --experts 32 >/dev/null
  bench=("$build/bench/dsv41_bench_session" "$syn" cuda "${PROMPT:-2048}" "${STEPS:-32}" 2048)
  CUDA_VISIBLE_DEVICES=0 "${bench[@]}" || status=1
  for nccl in 0 1; do
    echo "-- DSV41_TP_NCCL=$nccl"
    pair "$nccl" "--tp" "--tp" "${bench[@]}" || status=1
  done
fi
exit "$status"
