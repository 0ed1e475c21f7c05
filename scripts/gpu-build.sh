#!/usr/bin/env bash
# Configures the GPU build like scripts/gpu-test.sh and builds only the named targets: for quick
# device iterations on one kernel (the full kernel tier is scripts/gpu-test.sh).
#   scripts/gpu-build.sh TARGET...   (BUILD_DIR, JOBS, DEPS_PREFIX as in gpu-test.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
[ $# -gt 0 ] || { echo "usage: scripts/gpu-build.sh TARGET..." >&2; exit 2; }
build="${BUILD_DIR:-build-gpu}"
jobs="${JOBS:-$(nproc)}"
nvcc="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
cmake_args=()
if [ -n "${DEPS_PREFIX:-}" ]; then
  DEPS_PREFIX="$(cd "$DEPS_PREFIX" && pwd)"
  cmake_args+=("-DCMAKE_PREFIX_PATH=$DEPS_PREFIX")
  export PKG_CONFIG_PATH="$DEPS_PREFIX/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
fi
export CMAKE_POLICY_VERSION_MINIMUM=3.5
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DDSV41_CUDA=ON -DDSV41_NATIVE=ON -DDSV41_BUILD_TESTS=ON \
  -DDSV41_BUILD_SERVER=OFF -DDSV41_BUILD_EXAMPLES=OFF "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j "$jobs" --target "$@"
