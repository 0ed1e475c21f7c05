#!/usr/bin/env bash
# golden:cli_exl3_model — `dsv41 info` reports the EXL3 plan of a Spark directory (experts per K per
# layer, native experts, bytes, bpw, FP4 layers) and `dsv41 logits` of the tiny EXL3 model equals
# its dense twin's (abs 2e-3, same argmax; see test_exl3_model.cpp for the measured numbers).
# usage: cli_exl3_model.sh DSV41_BINARY MAKE_TINY_EXL3_MODEL_BINARY
set -euo pipefail
bin="$1"
make_model="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$make_model" "$tmp" > /dev/null || fail "make_tiny_exl3_model"
exl3="$tmp/exl3_model"
dense="$tmp/dense_twin"

"$bin" info --model "$exl3" > "$tmp/info.txt" || fail "info: $(cat "$tmp/info.txt")"
out="$(cat "$tmp/info.txt")"
grep -q "routed experts: EXL3 banks (decoded on the fly) + release FP4" <<< "$out" || fail "no plan header: $out"
grep -q "plan: $exl3/exl3/plan/plan.json" <<< "$out" || fail "plan path: $out"
grep -q "experts per layer 6, hidden 128, inter 128" <<< "$out" || fail "dims: $out"
grep -Eq "^layer +K2 +K3 +K4 +K5 +native +bytes +bpw$" <<< "$out" || fail "table head: $out"
# Per expert: 3 x (trellis 8*8*16K*2 B + suh/svh 2*256 B + mul1 4 B) = 6144K + 1548 B; bpw = K + 0.252
# over 3*128*128 stored weights (layer 0: 5 K3 + 1 K5 = 5*19980 + 32268 = 132168 B).
grep -Eq "^ +0 +0 +5 +0 +1 +0 +132168 +3\.585$" <<< "$out" || fail "layer 0 row: $out"
grep -Eq "^ +2 +4 +1 +0 +0 +1 +75324 +2\.452$" <<< "$out" || fail "layer 2 row: $out"
grep -Eq "^ +5 +1 +0 +4 +0 +1 +118332 +3\.852$" <<< "$out" || fail "layer 5 row: $out"
grep -Eq "^ +7 +0 +0 +0 +6 +0 +193608 +5\.252$" <<< "$out" || fail "layer 7 row: $out"
grep -q "total: 22 EXL3 experts (K2 5, K3 6, K4 4, K5 7), 2 native (release FP4), 519432 bytes" <<< "$out" \
  || fail "totals: $out"
grep -q "layers absent from the plan (release FP4 experts): \[1,3,4,6\]" <<< "$out" || fail "FP4 layers: $out"

"$bin" info --model "$dense" > "$tmp/info_dense.txt" || fail "info dense twin"
if grep -q "EXL3" "$tmp/info_dense.txt"; then fail "dense twin reported a plan"; fi

ids="0,593,59,305,260,84,71,260,561,69,574,260,358,575,86,16,594"
"$bin" logits --model "$exl3" --ids "$ids" --out "$tmp/a.safetensors" --threads 1 > /dev/null \
  || fail "logits exl3"
"$bin" logits --model "$dense" --ids "$ids" --out "$tmp/b.safetensors" --threads 1 > /dev/null \
  || fail "logits dense"
python3 - "$tmp/a.safetensors" "$tmp/b.safetensors" <<'PY' || fail "EXL3 vs dense twin logits"
import json, struct, sys
def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        info = json.loads(f.read(n))["logits"]
        a, b = info["data_offsets"]
        f.seek(8 + n + a)
        raw = f.read(b - a)
    return info["shape"], struct.unpack("<%df" % (len(raw) // 4), raw)
(sa, a), (sb, b) = read(sys.argv[1]), read(sys.argv[2])
assert sa == sb, (sa, sb)
V = sa[1]
worst = max(abs(x - y) for x, y in zip(a, b))
assert worst <= 2e-3, "max |dlogit| %g" % worst
for r in range(sa[0]):
    ra, rb = a[r*V:(r+1)*V], b[r*V:(r+1)*V]
    assert ra.index(max(ra)) == rb.index(max(rb)), "argmax differs at row %d" % r
PY

set +e
"$bin" info --model "$exl3" --plan nope 2> "$tmp/err.txt"; rc=$?
set -e
[ $rc -eq 1 ] || fail "--plan nope: exit $rc"
grep -q "EXL3 plan 'nope'" "$tmp/err.txt" || fail "--plan nope message: $(cat "$tmp/err.txt")"
rm "$exl3/exl3/qb/K5/L07.safetensors"
set +e
"$bin" logits --model "$exl3" --ids 0,1 --out "$tmp/c.safetensors" 2> "$tmp/err.txt"; rc=$?
set -e
[ $rc -eq 1 ] || fail "missing bank file: exit $rc"
grep -q "layer 7 expert 1 (state K5) is in no bank file" "$tmp/err.txt" || fail "missing expert message: $(cat "$tmp/err.txt")"
echo "cli_exl3_model: ok"
