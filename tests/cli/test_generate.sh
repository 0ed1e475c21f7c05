#!/usr/bin/env bash
# `dsv41 generate` and `dsv41 predict` on the tiny8 oracle model: greedy tokens and the top next
# token equal the oracle's; bad input gives one line on stderr and a non-zero exit code.
#   test_generate.sh DSV41 FIXTURES_DIR
set -euo pipefail
dsv41="$1" model="$2/golden/tiny8"
g="$model/golden.json"
ids=$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); print(",".join(map(str,[p for p in g["prompts"] if p["name"]=="prompt1"][0]["ids"])))' "$g")
want=$(python3 -c 'import json,sys; print("".join("[%d]" % t for t in json.load(open(sys.argv[1]))["greedy"]["tokens"]))' "$g")
got=$("$dsv41" generate --model "$model" --ids "$ids" --max-tokens 12 --ignore-eos --show-ids 2>/dev/null | grep -oE '\[[0-9]+\]' | tr -d '\n')
[ "$got" = "$want" ] || { echo "generate: got $got, want $want"; exit 1; }

top=$("$dsv41" predict --model "$model" --prompt "<｜begin▁of▁sentence｜>Hello," --top 3 | awk '/ 1\. id/ {print $3}')
argmax=$(python3 - "$model/golden.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
t = h["prompt0.argmax"]; f.seek(8 + n + t["data_offsets"][0])
vals = struct.unpack("<%di" % t["shape"][0], f.read(t["data_offsets"][1] - t["data_offsets"][0]))
print(vals[-1])
PY
)
[ "$top" = "$argmax" ] || { echo "predict: top-1 id $top, oracle argmax $argmax"; exit 1; }

expect_fail() {  # expect_fail NEEDLE CMD...
  local needle="$1"; shift
  if "$@" >/dev/null 2>err.txt; then echo "accepted: $*"; exit 1; fi
  [ "$(wc -l < err.txt)" -eq 1 ] || { echo "not one line: $(cat err.txt)"; exit 1; }
  grep -qF -- "$needle" err.txt || { echo "error lacks '$needle': $(cat err.txt)"; exit 1; }
}
expect_fail "exactly one of" "$dsv41" generate --model "$model"
expect_fail "not a token id" "$dsv41" generate --model "$model" --ids 0,x
expect_fail "prompt[1] = 99999" "$dsv41" generate --model "$model" --ids 0,99999
expect_fail "config.json" "$dsv41" predict --model "$2/nope" --prompt hi
expect_fail "unknown flag --bogus" "$dsv41" predict --model "$model" --prompt hi --bogus 1
expect_fail "top_p" "$dsv41" generate --model "$model" --ids 0,5 --top-p 7
echo "generate/predict OK"
