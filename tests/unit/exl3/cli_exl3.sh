#!/usr/bin/env bash
# `dsv41 exl3-decode` and `dsv41 exl3-plan` end to end on the golden/exl3 fixtures.
# Usage: cli_exl3.sh <dsv41 binary> <tests/fixtures/golden/exl3>
set -euo pipefail
DSV41=$1
FIX=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- exl3-decode: Ŵ bit-exact, W within 1 fp32 ulp of the oracle ---
"$DSV41" exl3-decode --file "$FIX/cases/mul1_K3_512x384.safetensors" --prefix linear \
  --out "$TMP/dec.safetensors" > "$TMP/decode.txt"
grep -q "K=3 codebook=mul1 k(in)=512 n(out)=384" "$TMP/decode.txt" || fail "decode summary: $(cat "$TMP/decode.txt")"
python3 - "$TMP/dec.safetensors" "$FIX/cases/mul1_K3_512x384.safetensors" <<'PY'
import json, struct, sys
def load(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    head = json.loads(data[8:8 + n])
    base = 8 + n
    return {k: (v['dtype'], v['shape'], data[base + v['data_offsets'][0]:base + v['data_offsets'][1]])
            for k, v in head.items() if k != '__metadata__'}
got, want = load(sys.argv[1]), load(sys.argv[2])
assert got['inner'][0] == 'F16' and got['inner'][1] == [512, 384], got['inner'][:2]
assert got['weight'][0] == 'F32' and got['weight'][1] == [512, 384], got['weight'][:2]
assert got['inner'][2] == want['expected.w_inner'][2], 'inner differs from expected.w_inner'
g = struct.unpack('<%df' % (512 * 384), got['weight'][2])
w = struct.unpack('<%df' % (512 * 384), want['expected.w'][2])
worst = max(abs(a - b) / (abs(b) * 2**-23) if b else (0 if a == b else float('inf')) for a, b in zip(g, w))
assert worst <= 1.0, 'weight differs from expected.w by %.3f ulp' % worst
PY

# --- exl3-decode errors ---
set +e
"$DSV41" exl3-decode --file "$FIX/cases/mul1_K3_512x384.safetensors" --prefix nope \
  --out "$TMP/x.safetensors" 2> "$TMP/err.txt"; rc=$?
set -e
[ $rc -eq 1 ] || fail "missing prefix: exit $rc"
grep -q "no EXL3 tensor at prefix 'nope'" "$TMP/err.txt" || fail "missing prefix message: $(cat "$TMP/err.txt")"
set +e
"$DSV41" exl3-decode --file "$FIX/cases/mul1_K3_512x384.safetensors" --prefix linear 2> "$TMP/err.txt"; rc=$?
set -e
[ $rc -eq 2 ] || fail "missing --out: exit $rc"
grep -q "out" "$TMP/err.txt" || fail "missing --out message: $(cat "$TMP/err.txt")"

# --- exl3-plan on the bank example ---
"$DSV41" exl3-plan --model "$FIX/bank_example" --experts 8 --world 2 > "$TMP/plan.txt"
grep -q "hidden 256, inter 128" "$TMP/plan.txt" || fail "plan dims: $(cat "$TMP/plan.txt")"
grep -Eq "^ +0 +6 +2 +0 +0 " "$TMP/plan.txt" || fail "layer 0 counts: $(cat "$TMP/plan.txt")"
grep -Eq "^ +1 +0 +2 +6 +0 " "$TMP/plan.txt" || fail "layer 1 counts: $(cat "$TMP/plan.txt")"
grep -q "total: 16 EXL3 experts (K2 6, K3 4, K5 6), 0 native" "$TMP/plan.txt" || fail "totals: $(cat "$TMP/plan.txt")"
grep -q "TP 2 rank 1: experts \[4, 8)" "$TMP/plan.txt" || fail "rank line: $(cat "$TMP/plan.txt")"

# Launcher-style absolute roots are re-rooted under the model dir.
cat > "$TMP/plan.json" <<'JSON'
{"layers": {"0": "K2", "1": "K5"}, "keep_native": {},
 "expert_state": {"0": {"3": "K3", "5": "K3"}, "1": {"2": "K3", "6": "K3"}},
 "qdir": "/model/exl3/qn:/model/exl3/q31:/model/exl3/q31s"}
JSON
"$DSV41" exl3-plan --model "$FIX/bank_example" --plan "$TMP/plan.json" --experts 8 > "$TMP/plan2.txt"
grep -q "re-rooted under the model dir" "$TMP/plan2.txt" || fail "re-root note: $(cat "$TMP/plan2.txt")"
grep -q "total: 16 EXL3 experts (K2 6, K3 4, K5 6)" "$TMP/plan2.txt" || fail "re-rooted totals"

# --- exl3-plan errors ---
set +e
"$DSV41" exl3-plan --model "$TMP" 2> "$TMP/err.txt"; rc=$?
set -e
[ $rc -eq 1 ] || fail "no plan dir: exit $rc"
grep -q "no exl3/plan directory" "$TMP/err.txt" || fail "no plan message: $(cat "$TMP/err.txt")"
set +e
"$DSV41" exl3-plan --model "$FIX/bank_example" --experts 9 2> "$TMP/err.txt"; rc=$?
set -e
[ $rc -eq 1 ] || fail "missing expert: exit $rc"
grep -q "layer 0 expert 8 (state K2) is in no bank file" "$TMP/err.txt" || fail "missing expert message: $(cat "$TMP/err.txt")"
echo "cli_exl3: ok"
