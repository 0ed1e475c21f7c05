#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the bundled tiny model on the CPU
# (next-token predictions of the CPU reference forward pass for a prompt).
# Environment: PROMPT (default "Hello,"), MODEL (default the bundled tiny8 model), JOBS.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${JOBS:-$(nproc)}" --target dsv41_cli
model="${MODEL:-tests/fixtures/golden/tiny8}"
exec build/tools/dsv41/dsv41 predict --model "$model" --prompt "${PROMPT:-Hello,}" --top 5
