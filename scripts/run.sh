#!/usr/bin/env bash
# README command 1: install dependencies, build, and serve the bundled tiny model on the CPU with
# dsv41-server (OpenAI-compatible API, docs/server.md). Prints the URL and the API key file.
# Environment: MODEL (default the bundled tiny8 model), PORT (default 8000), HOST (default
# 127.0.0.1), KEY_FILE (default build/dsv41-api-key), JOBS.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
# The server needs no test framework (Catch2 2.x, which Ubuntu 24.04 does not package).
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release -DDSV41_BUILD_TESTS=OFF
cmake --build build -j "${JOBS:-$(nproc)}" --target dsv41_cli dsv41-server
model="${MODEL:-tests/fixtures/golden/tiny8}"
host="${HOST:-127.0.0.1}"
port="${PORT:-8000}"
key_file="${KEY_FILE:-build/dsv41-api-key}"
echo "dsv41-server: http://${host}:${port}/v1  (API key file: ${key_file}; created 0600 if absent)"
echo "try: curl -H \"Authorization: Bearer \$(cat ${key_file})\" http://${host}:${port}/v1/models"
# An exported DSV41_API_KEY (e.g. for Pi) would win over --api-key-file and make the hint above
# wrong; the server gets the key file only.
exec env -u DSV41_API_KEY build/server/dsv41-server --model "$model" --host "$host" \
  --port "$port" --api-key-file "$key_file"
