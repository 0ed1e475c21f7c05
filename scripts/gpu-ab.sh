#!/usr/bin/env bash
# On the lent GPU machine: dsv41_bench_cuda_forward on the working tree, then on the baseline that
# scripts/ab-prepare.sh put in .ab/ (its files copied over the tree and touched: the machine's copy
# of the tree keeps the files' old modification times, so without the touch ninja would keep the
# tree's objects), then the tree restored, all in one call so both runs share the machine. The
# synthetic checkpoint must exist (bench/synthetic: dsv41_make_synthetic DIR --layers 40
# --experts 32). Prints each run's decode table and profile lines; full output in $OUT (or /tmp).
# Usage: scripts/gpu-ab.sh CHECKPOINT_DIR [bench arguments...]
#   e.g. scripts/gpu-ab.sh /tmp/syn 0 1,2,6 5 2048
# Environment: BUILD_DIR (default build-gpu), DEPS_PREFIX, JOBS as scripts/gpu-build.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dir="${1:?usage: scripts/gpu-ab.sh CHECKPOINT_DIR [bench arguments...]}"
shift
build="${BUILD_DIR:-build-gpu}"
out="${OUT:-/tmp}"
if [ ! -d .ab/base ] || [ ! -d .ab/tree ] || [ ! -f .ab/removed ]; then
  echo "gpu-ab.sh: no .ab/ (run scripts/ab-prepare.sh BASE_REF first)" >&2
  exit 1
fi
[ -d "$dir" ] || { echo "gpu-ab.sh: no checkpoint at $dir" >&2; exit 1; }
if [ -n "${DEPS_PREFIX:-}" ]; then
  deps="$(cd "$DEPS_PREFIX" && pwd)"
  export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi

# Copies the files under $1 over the tree and touches them (see above).
overlay() {
  (cd "$1" && find . -type f | sed 's|^\./||') | while IFS= read -r f; do
    mkdir -p "$(dirname "$f")"
    cp "$1/$f" "$f"
    touch "$f"
  done
}
bench() {
  echo "== $1"
  "$build/bench/dsv41_bench_cuda_forward" "$dir" "${@:2}" | tee "$out/ab-$1.txt" |
    grep -E '^\| [0-9]|^profile|^device' || true
}

scripts/gpu-build.sh dsv41_bench_cuda_forward >"$out/ab-build-tree.log" 2>&1 ||
  { tail -30 "$out/ab-build-tree.log"; exit 1; }
bench tree "$@"
while IFS= read -r f; do rm -f "$f"; done <.ab/removed
overlay .ab/base
status=0
if cmake --build "$build" --target dsv41_bench_cuda_forward >"$out/ab-build-base.log" 2>&1; then
  bench base "$@"
else
  tail -30 "$out/ab-build-base.log"
  status=1
fi
overlay .ab/tree
cmake --build "$build" --target dsv41_bench_cuda_forward >"$out/ab-build-restore.log" 2>&1 ||
  { tail -30 "$out/ab-build-restore.log"; exit 1; }
exit "$status"
