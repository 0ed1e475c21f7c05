#!/usr/bin/env bash
# CLI checks for `dsv41 tokenize` / `dsv41 detokenize` (ctest unit:cli_tokenize_<case>).
# usage: cli_test.sh <tokenize|detokenize|roundtrip|errors> <dsv41 binary> <tests/fixtures dir>
set -u
case_name=$1 bin=$2 fixtures=$3
tiny="$fixtures/golden/tokenizer/tiny_tokenizer.json"
tiny40="$fixtures/golden/tiny40"
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check_eq() {  # name expected actual
  if [[ "$2" != "$3" ]]; then
    echo "FAIL $1: expected [$2] got [$3]"
    failures=$((failures + 1))
  fi
}

# expect_fail name want_rc needle cmd... (stdin from $tmp/in): exit code, one stderr line, needle.
expect_fail() {
  local name=$1 want=$2 needle=$3
  shift 3
  "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  check_eq "$name exit code" "$want" "$rc"
  check_eq "$name stderr lines" "1" "$(wc -l <"$tmp/err" | tr -d ' ')"
  if ! grep -qF -- "$needle" "$tmp/err"; then
    echo "FAIL $name: stderr lacks [$needle]: $(cat "$tmp/err")"
    failures=$((failures + 1))
  fi
}

case $case_name in
  tokenize)
    check_eq hello "[1422,402,105,38,329,350,102,94,27]" \
      "$(printf 'Hello, world!' | "$bin" tokenize --tokenizer "$tiny")"
    check_eq special "[4,1422,402,105]" \
      "$(printf '<｜User｜>Hello' | "$bin" tokenize --tokenizer "$tiny" --special)"
    plain=$(printf '<｜User｜>Hello' | "$bin" tokenize --tokenizer "$tiny")
    [[ "$plain" != \[4,* ]] || { echo "FAIL: special token parsed without --special"; failures=$((failures + 1)); }
    check_eq model-dir "[0,42,274,387,14]" \
      "$(printf '<｜begin▁of▁sentence｜>Hello,' | "$bin" tokenize --model "$tiny40" --special)"
    check_eq empty "[]" "$(printf '' | "$bin" tokenize --tokenizer "$tiny")"
    ;;
  detokenize)
    check_eq hello "Hello, world!" \
      "$(echo '[1422, 402, 105, 38, 329, 350, 102, 94, 27]' | "$bin" detokenize --tokenizer "$tiny")"
    check_eq partial "a�" "$(echo '[91,196]' | "$bin" detokenize --tokenizer "$tiny")"
    check_eq special "<｜User｜>hé" "$(echo '[4,98,372]' | "$bin" detokenize --tokenizer "$tiny")"
    check_eq empty "" "$(echo '[]' | "$bin" detokenize --tokenizer "$tiny")"
    ;;
  roundtrip)
    printf 'line1\r\n\tdef f(x):\n  return "日本語" + 😀 <｜User｜> 12345\n\n' >"$tmp/text"
    for flag in "" "--special"; do
      "$bin" tokenize --tokenizer "$tiny" $flag <"$tmp/text" >"$tmp/ids" &&
        "$bin" detokenize --tokenizer "$tiny" <"$tmp/ids" >"$tmp/back"
      cmp -s "$tmp/text" "$tmp/back" || { echo "FAIL roundtrip [$flag]"; failures=$((failures + 1)); }
    done
    ;;
  errors)
    printf 'x' >"$tmp/in"
    expect_fail no-source 2 "--tokenizer FILE or --model DIR" "$bin" tokenize
    expect_fail both-sources 2 "exactly one" "$bin" tokenize --tokenizer "$tiny" --model "$tiny40"
    expect_fail unknown-flag 2 "unknown flag --bogus" "$bin" tokenize --tokenizer "$tiny" --bogus
    expect_fail special-value 2 "--special takes no value" \
      "$bin" tokenize --tokenizer "$tiny" --special yes
    expect_fail missing-file 1 "/nonexistent/tok.json" "$bin" tokenize --tokenizer /nonexistent/tok.json
    expect_fail missing-model 1 "/nonexistent/dir/tokenizer.json" "$bin" detokenize --model /nonexistent/dir
    printf '{"model": {"type": "Unigram"}}' >"$tmp/bad.json"
    expect_fail bad-model 1 "model.type" "$bin" tokenize --tokenizer "$tmp/bad.json"
    printf 'ok\xff' >"$tmp/in"
    expect_fail bad-utf8 1 "not valid UTF-8 at byte 2" "$bin" tokenize --tokenizer "$tiny"
    printf '[1, 2' >"$tmp/in"
    expect_fail bad-json 1 "JSON array of token ids" "$bin" detokenize --tokenizer "$tiny"
    printf '{"a": 1}' >"$tmp/in"
    expect_fail not-array 1 "JSON array of token ids" "$bin" detokenize --tokenizer "$tiny"
    printf '[1, "x"]' >"$tmp/in"
    expect_fail not-int 1 "element 1 of the id array is not an integer" \
      "$bin" detokenize --tokenizer "$tiny"
    printf '[5, 99999]' >"$tmp/in"
    expect_fail out-of-range 1 "token id 99999 is out of range" "$bin" detokenize --tokenizer "$tiny"
    printf '[5, -1]' >"$tmp/in"
    expect_fail negative 1 "token id -1" "$bin" detokenize --tokenizer "$tiny"
    ;;
  *)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "ok"
