#!/usr/bin/env bash
# golden:cli_logits — `dsv41 logits` on tiny8 prompt1 (one shot, chunked, decode) must match the
# oracle's prompt1.logits within abs 2e-3 with identical argmax; `dsv41 info` prints the roles;
# bad arguments exit 2 and bad models exit 1, each with one line on stderr.
# usage: cli_test.sh DSV41_BINARY FIXTURE_DIR(tests/fixtures/golden/tiny8)
set -u
bin="$1"
model="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Reads golden/logits tensors with the stdlib only (safetensors: u64 header length, JSON, data).
py_st='
import json, struct, sys
def read(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        info = hdr[name]
        a, b = info["data_offsets"]
        f.seek(8 + n + a)
        raw = f.read(b - a)
    fmt = {"F32": "f", "I32": "i"}[info["dtype"]]
    return info["shape"], list(struct.unpack("<%d%s" % (len(raw) // 4, fmt), raw))
'
ids="$(python3 -c "$py_st
shape, v = read(sys.argv[1], 'prompt1.input_ids')
print(','.join(str(x) for x in v))" "$model/golden.safetensors")" || fail "cannot read prompt1.input_ids"

compare() {  # compare FILE: logits vs prompt1.logits, abs 2e-3 and argmax
  python3 -c "$py_st
gs, g = read(sys.argv[1], 'prompt1.logits')
ls, l = read(sys.argv[2], 'logits')
assert gs == ls, 'shape %s vs golden %s' % (ls, gs)
V = gs[1]
worst = max(abs(a - b) for a, b in zip(g, l))
for r in range(gs[0]):
    gr, lr = g[r*V:(r+1)*V], l[r*V:(r+1)*V]
    assert gr.index(max(gr)) == lr.index(max(lr)), 'argmax differs at row %d' % r
print('max abs diff %.3g' % worst)
assert worst <= 2e-3, 'max abs diff %g > 2e-3' % worst
" "$model/golden.safetensors" "$1" || fail "logits of $1 differ from the oracle"
}

"$bin" logits --model "$model" --ids "$ids" --out "$tmp/one.safetensors" --threads 2 ||
  fail "dsv41 logits (one shot) exited $?"
compare "$tmp/one.safetensors"
"$bin" logits --model "$model" --ids "$ids" --out "$tmp/chunk.safetensors" --chunk 7 \
  --decode-from 30 || fail "dsv41 logits (chunked + decode) exited $?"
compare "$tmp/chunk.safetensors"

"$bin" info --model "$model" > "$tmp/info.txt" || fail "dsv41 info exited $?"
grep -q "layer roles" "$tmp/info.txt" || fail "info prints no layer roles"
grep -Eq "^ +6 ratio 1 reindex +kv +4 index +6 candidate +4" "$tmp/info.txt" ||
  fail "info: layer 6 role line missing"

expect_exit() {  # expect_exit CODE ARGS...: exit code and exactly one stderr line
  local want="$1"; shift
  "$bin" "$@" > /dev/null 2> "$tmp/err.txt"
  local got=$?
  [ "$got" = "$want" ] || fail "dsv41 $* exited $got, expected $want"
  [ "$(wc -l < "$tmp/err.txt")" = 1 ] || fail "dsv41 $*: stderr is not one line: $(cat "$tmp/err.txt")"
}
expect_exit 2 logits --ids 0,1 --out "$tmp/x.safetensors"
expect_exit 2 logits --model "$model" --ids 0,x --out "$tmp/x.safetensors"
expect_exit 2 logits --model "$model" --ids 0,1 --out "$tmp/x.safetensors" --bogus 3
expect_exit 2 logits --model "$model" --ids 0,1 --out "$tmp/x.safetensors" --decode-from 5
expect_exit 1 logits --model "$tmp/no-such-model" --ids 0,1 --out "$tmp/x.safetensors"
expect_exit 1 logits --model "$model" --ids 0,600 --out "$tmp/x.safetensors"
expect_exit 1 logits --model "$model" --ids 0,1 --out "$tmp/no-such-dir/x.safetensors"
expect_exit 1 info --model "$tmp/no-such-model"
echo "cli_logits: ok"
