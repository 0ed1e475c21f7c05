#!/usr/bin/env bash
# Builds the CUDA backend for the GPU of this machine and runs the [kernel] tests (CUDA kernels vs
# the CPU reference) and the CUDA benchmarks. CI has no GPU and never runs this; scripts/test.sh
# excludes the kernel label.
# Environment:
#   BUILD_DIR      build directory (default build-gpu)
#   JOBS           parallel build jobs (default nproc)
#   DEPS_PREFIX    extra install prefix for headers/libraries the host lacks (fmt, simdjson,
#                  PCRE2, utf8proc, Catch2 v2), laid out like /usr: the lent GPU machine has no
#                  apt, so the Debian files travel there as .gpu-deps/usr (docs/kernels.md)
#   BENCH          1 (default) runs the benchmarks after the tests, 0 skips them
#   BENCH_REPEATS  timed repeats per benchmark cell (default 30)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build-gpu}"
jobs="${JOBS:-$(nproc)}"

nvidia-smi -L || { echo "gpu-test.sh: no NVIDIA GPU visible (nvidia-smi failed)" >&2; exit 1; }
if [ -n "${DEPS_PREFIX:-}" ]; then
  DEPS_PREFIX="$(cd "$DEPS_PREFIX" && pwd)"
  export DEPS_PREFIX LD_LIBRARY_PATH="$DEPS_PREFIX/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
export BUILD_DIR="$build" JOBS="$jobs"
scripts/gpu-build.sh  # configure

all_targets="$(ninja -C "$build" -t targets all)"
# Every kernel-tier executable (tests/kernel/CMakeLists.txt): a test binary that is not built
# registers no ctest tests, so a hand-kept list would skip new ones silently.
mapfile -t targets < <(grep -oE '^test_kernel_[a-z0-9_]+:' <<<"$all_targets" | tr -d ':' | sort -u)
[ ${#targets[@]} -gt 0 ] || { echo "gpu-test.sh: no test_kernel_* targets configured" >&2; exit 1; }
benches=()
for b in dsv41_bench_cuda_linear dsv41_bench_cuda_exl3 dsv41_bench_cuda_moe dsv41_bench_cuda_forward; do
  if grep -q "^$b:" <<<"$all_targets"; then
    benches+=("$b")
  else
    echo "gpu-test.sh: WARNING: benchmark target $b is not configured (bench/ not added?)" >&2
  fi
done
# Built for the whole-model benchmarks of docs/perf.md (need a synthetic checkpoint; not run here).
tools=()
for b in dsv41_make_synthetic dsv41_bench_session dsv41_bench_cuda_chunks dsv41_bench_cuda_dspark; do
  if grep -q "^$b:" <<<"$all_targets"; then tools+=("$b"); fi
done
scripts/gpu-build.sh "${targets[@]}" "${benches[@]}" "${tools[@]}"
ctest --test-dir "$build" -L kernel --output-on-failure --timeout 900

if [ "${BENCH:-1}" = "1" ]; then
  for b in "${benches[@]}"; do
    "$build/bench/$b" "${BENCH_REPEATS:-30}"
  done
fi
