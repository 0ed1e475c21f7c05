#!/usr/bin/env bash
# Builds everything and runs every test tier that this machine can run (README command 2, .ci/run).
#   unit, golden, server, tp (CPU)     always
#   fuzz                               bounded libFuzzer runs (clang + ASan/UBSan build in build-fuzz)
#   kernel (GPU)                       only where a CUDA device is present (scripts/gpu-test.sh)
# Environment: JOBS (default nproc), BUILD_DIR (default build), SKIP_FUZZ=1 to skip the fuzz build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
jobs="${JOBS:-$(nproc)}"
build="${BUILD_DIR:-build}"

cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDSV41_FATAL_WARNINGS=ON \
  -DDSV41_BUILD_TESTS=ON  # (scripts/run.sh turns them off in the same build dir)
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" -j "$jobs" --output-on-failure -LE 'kernel|e2e' --timeout 900

if [ "${SKIP_FUZZ:-0}" != "1" ]; then
  CC=clang CXX=clang++ cmake -G Ninja -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDSV41_CUDA=OFF -DDSV41_BUILD_TESTS=ON -DDSV41_BUILD_FUZZERS=ON \
    -DDSV41_BUILD_EXAMPLES=OFF -DDSV41_BUILD_SERVER=OFF -DDSV41_SANITIZE="address;undefined"
  fuzz_targets=$(ninja -C build-fuzz -t targets all | grep -oE '^fuzz_[a-z_]+:' | tr -d ':' | sort -u)
  cmake --build build-fuzz -j "$jobs" --target $fuzz_targets
  ctest --test-dir build-fuzz -L fuzz --output-on-failure
fi
