#!/usr/bin/env bash
# Configures the CUDA build for the GPU of this machine and builds the named targets (none: only
# configures). scripts/gpu-test.sh runs it for the whole kernel tier; alone it serves quick device
# iterations on one kernel, e.g. scripts/gpu-build.sh test_kernel_attention.
# Environment:
#   BUILD_DIR      build directory (default build-gpu)
#   JOBS           parallel build jobs (default nproc)
#   DEPS_PREFIX    extra install prefix for headers/libraries the host lacks (fmt, simdjson,
#                  PCRE2, utf8proc, Catch2 v2), laid out like /usr: the lent GPU machine has no
#                  apt, so the Debian files travel there as .gpu-deps/usr (docs/kernels.md)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build-gpu}"
jobs="${JOBS:-$(nproc)}"
nvcc="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$nvcc" ] || command -v "$nvcc" >/dev/null || { echo "gpu-build.sh: no nvcc" >&2; exit 1; }
cmake_args=()
if [ -n "${DEPS_PREFIX:-}" ]; then
  DEPS_PREFIX="$(cd "$DEPS_PREFIX" && pwd)"
  cmake_args+=("-DCMAKE_PREFIX_PATH=$DEPS_PREFIX")
  export PKG_CONFIG_PATH="$DEPS_PREFIX/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
fi
# CMake 4 drops policies older than 3.5; Debian's Catch2/fmt config files are that old.
export CMAKE_POLICY_VERSION_MINIMUM=3.5
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DDSV41_CUDA=ON -DDSV41_NATIVE=ON -DDSV41_BUILD_TESTS=ON \
  -DDSV41_BUILD_SERVER=OFF -DDSV41_BUILD_EXAMPLES=OFF "${cmake_args[@]}" >/dev/null
[ $# -eq 0 ] || cmake --build "$build" -j "$jobs" --target "$@"
