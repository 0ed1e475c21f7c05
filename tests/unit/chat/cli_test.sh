#!/usr/bin/env bash
# `dsv41 render` / `dsv41 parse` end to end against the chat goldens.
# usage: cli_test.sh DSV41_BINARY render|parse|errors FIXTURES_DIR
# Needs python3 (stdlib only) to split the JSONL goldens into files and compare JSON.
set -euo pipefail
bin=$1 part=$2 fixtures=$3
golden=$fixtures/golden/chat
tok=$fixtures/golden/tokenizer/tiny_tokenizer.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v python3 >/dev/null || { echo "cli_test.sh: python3 is required" >&2; exit 1; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# Splits a JSONL file into $work/<n>.<field> files (raw strings, or JSON for objects).
split_cases() {
  python3 - "$1" "$work" "${@:2}" <<'PY'
import json, sys
src, out, fields = sys.argv[1], sys.argv[2], sys.argv[3:]
for n, line in enumerate(open(src, encoding="utf-8")):
    row = json.loads(line)
    open(f"{out}/{n}.row.json", "w", encoding="utf-8").write(line)
    for f in fields:
        v = row[f]
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        open(f"{out}/{n}.{f}", "w", encoding="utf-8", newline="").write(text)
PY
}

case $part in
render)
  split_cases "$golden/render_cases.jsonl" expected_prompt name
  count=0
  for req in "$work"/*.row.json; do
    n=${req%.row.json}
    "$bin" render < "$req" > "$n.got" || fail "render $(cat "$n.name") exited $?"
    cmp -s "$n.got" "$n.expected_prompt" || fail "render $(cat "$n.name"): prompt differs"
    count=$((count + 1))
  done
  [ "$count" -eq 56 ] || fail "expected 56 render cases, ran $count"
  # --ids: the rendered prompt tokenized with special tokens parsed.
  for n in 0 23 39; do
    "$bin" render --tokenizer "$tok" --ids < "$work/$n.row.json" > "$work/ids.got"
    "$bin" tokenize --tokenizer "$tok" --special < "$work/$n.expected_prompt" > "$work/ids.want"
    cmp -s "$work/ids.got" "$work/ids.want" || fail "render --ids case $n differs from tokenize"
    bos=$(printf '<｜begin▁of▁sentence｜>' | "$bin" tokenize --tokenizer "$tok" --special)
    [ "$(cut -d, -f1 "$work/ids.got" | tr -d '[]\n')" = "$(tr -d '[]\n' <<< "$bos")" ] ||
      fail "render --ids case $n does not start with the BOS id"
  done
  echo "render: $count golden prompts byte-identical, --ids checked"
  ;;
parse)
  split_cases "$golden/parse_cases.jsonl" raw_output thinking_mode
  count=0
  for req in "$work"/*.row.json; do
    n=${req%.row.json}
    flag=""
    [ "$(cat "$n.thinking_mode")" = thinking ] && flag=--thinking
    "$bin" parse $flag --seed 1 < "$n.raw_output" > "$n.got" 2> "$n.err" || fail "parse exited $?"
    [ ! -s "$n.err" ] || fail "parse case $n printed warnings: $(cat "$n.err")"
    count=$((count + 1))
  done
  [ "$count" -eq 32 ] || fail "expected 32 parse cases, ran $count"
  python3 - "$work" <<'PY' || fail "parse output differs from the goldens"
import glob, json, re, sys
for row_file in sorted(glob.glob(sys.argv[1] + "/*.row.json")):
    row = json.loads(open(row_file, encoding="utf-8").read())
    want = row["expected"]
    got = json.loads(open(row_file[:-len(".row.json")] + ".got", encoding="utf-8").read())
    name = row["name"]
    assert got["reasoning_content"] == want["reasoning_content"], name
    assert got["content"] == want["content"], name
    assert len(got["tool_calls"]) == len(want["tool_calls"]), name
    for g, w in zip(got["tool_calls"], want["tool_calls"]):
        assert re.fullmatch(r"call_[A-Za-z0-9]{24}", g["id"]) and g["type"] == "function", name
        assert g["function"]["name"] == w["name"], name
        assert json.loads(g["function"]["arguments"]) == w["arguments"], name
PY
  # A malformed output still parses (exit 0) and reports a warning on stderr.
  printf 'never closed' | "$bin" parse --thinking > "$work/m.got" 2> "$work/m.err"
  grep -q 'warning: missing </think>' "$work/m.err" || fail "no warning for a missing </think>"
  echo "parse: $count golden outputs match"
  ;;
errors)
  # Bad input: exit code != 0 and exactly one line on stderr that names the problem.
  expect_error() {  # expected_code needle command...
    local code=$1 needle=$2
    shift 2
    set +e
    "$@" > "$work/out" 2> "$work/err"
    local rc=$?
    set -e
    [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, expected $code"
    [ "$(wc -l < "$work/err")" -eq 1 ] || fail "'$*' stderr is not one line: $(cat "$work/err")"
    grep -qF -- "$needle" "$work/err" || fail "'$*' stderr lacks '$needle': $(cat "$work/err")"
  }
  echo '{' > "$work/bad.json"
  expect_error 1 "request: invalid JSON" bash -c "'$bin' render < '$work/bad.json'"
  echo '{"messages": [{"role": "user", "content": 5}]}' > "$work/content.json"
  expect_error 1 "messages[0].content: expected a string" bash -c "'$bin' render < '$work/content.json'"
  echo '{"messages": [{"role": "user", "content": "q"}], "reasoning_effort": "bogus"}' > "$work/effort.json"
  expect_error 1 'invalid reasoning effort "bogus"' bash -c "'$bin' render < '$work/effort.json'"
  echo '{"messages": [{"role": "function", "content": "q"}]}' > "$work/role.json"
  expect_error 1 "messages[0].role: unknown role 'function'" bash -c "'$bin' render < '$work/role.json'"
  expect_error 2 "--ids needs --tokenizer" bash -c "'$bin' render --ids < '$work/role.json'"
  expect_error 2 "--effort-table must be" bash -c "'$bin' render --effort-table x < '$work/role.json'"
  echo '{"messages": [{"role": "user", "content": "q"}]}' > "$work/ok.json"
  expect_error 1 "nonexistent" bash -c "'$bin' render --model /nonexistent --ids < '$work/ok.json'"
  expect_error 2 "unknown" bash -c "'$bin' parse --bogus < /dev/null"
  echo "errors: all rejected with one named line"
  ;;
*)
  fail "unknown part '$part'"
  ;;
esac
