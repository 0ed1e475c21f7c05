#!/usr/bin/env bash
# The C and C++ examples print the oracle's greedy tokens for prompt1 of tiny8.
#   test_examples.sh SIMPLE SIMPLE_C TWO_MODELS FIXTURES_DIR
set -euo pipefail
simple="$1" simple_c="$2" two_models="$3" fixtures="$4"
model="$fixtures/golden/tiny8"
prompt=$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); print([p for p in g["prompts"] if p["name"]=="prompt1"][0]["text"], end="")' "$model/golden.json")
want=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["greedy"]["tokens"])))' "$model/golden.json")
got_cpp=$("$simple" "$model" "$prompt" 12 | head -1 | sed 's/ *$//')
got_c=$("$simple_c" "$model" "$prompt" 12 | head -1 | sed 's/ *$//')
[ "$got_cpp" = "$want" ] || { echo "C++ example: got '$got_cpp', want '$want'"; exit 1; }
[ "$got_c" = "$want" ] || { echo "C example: got '$got_c', want '$want'"; exit 1; }
"$two_models" "$model" "$fixtures/golden/tiny40" 4 | grep -c '\[ok\]' | grep -qx 2 || { echo "two_models failed"; exit 1; }
# A bad model directory: one clear line, exit code != 0.
if "$simple_c" "$fixtures/nope" 2>err.txt; then echo "simple_c accepted a missing model"; exit 1; fi
grep -q "nope" err.txt || { echo "error does not name the directory: $(cat err.txt)"; exit 1; }
echo "examples OK: $want"
