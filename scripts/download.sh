#!/usr/bin/env bash
# Downloads the DeepSeek-V4.1-Flash Spark checkpoint from Hugging Face, reassembles the shards that
# ship as 50 GB pieces, and verifies everything. Re-running resumes and skips finished steps.
#
# Usage: scripts/download.sh          (all settings come from the environment)
#   e.g. MODEL_DIR=/data/dsv41 HF_TOKEN=hf_... scripts/download.sh
#
# Environment (default in parentheses):
#   MODEL_REPO    Hugging Face repository (0xSero/DeepSeek-V4.1-Flash-Spark)
#   REVISION      branch, tag or commit (main)
#   MODEL_DIR     destination; files keep the repository's relative paths, so the directory is a
#                 usable model as is ($HOME/models/DeepSeek-V4.1-Flash-Spark)
#   HF_ENDPOINT   hub URL, the variable the Hugging Face tools use (https://huggingface.co)
#   HF_TOKEN      access token, sent as "Authorization: Bearer" to the hub only (unset)
#   KEEP_PARTS    1 keeps the .partNN pieces after reassembly, 0 deletes them (0)
#   MANIFEST      sha256 manifest: a repository path, or an absolute local path (sha256-manifest.txt)
#   CURL_RETRIES  curl --retry count, also the number of resumes of an interrupted transfer (5)
#   DSV41_DOWNLOAD_FREE_BYTES  test hook: free bytes to assume instead of measuring MODEL_DIR (unset)
# Needs: bash 4+, curl, python3 (stdlib, JSON only), sha256sum, df and coreutils.
#
# Steps:
#  1. File list: GET $HF_ENDPOINT/api/models/$MODEL_REPO/tree/$REVISION?recursive=true, following
#     "Link: <url>; rel=next" pages. Directories and .gitattributes are ignored.
#  2. Free space: bytes still needed (unfinished files, plus each unfinished part group's whole size,
#     as the parts and the reassembled file coexist until the parts are deleted) vs df of MODEL_DIR.
#  3. Each file goes to <path>.incomplete (curl -C - resumes; an interrupted transfer is resumed up
#     to CURL_RETRIES times), is checked against the listed size and, for LFS files, the listed
#     sha256 (lfs.oid), then renamed. A verified file gets a stamp (MODEL_DIR/.dsv41-download/
#     <path>.sha256: "<sha256> <size>"); a file whose size matches its stamp is skipped with no
#     HTTP request. A file under its final name without a stamp is hashed and kept if it matches.
#  4. Files named <base>.partNN (NN digits) form a group: all listed parts are concatenated in
#     numeric order into <base>.incomplete, checked against the manifest entry for <base>, renamed,
#     stamped, and the parts deleted (unless KEEP_PARTS=1). A stamped <base> skips the group.
#  5. Every manifest entry is checked (stamped files with the same size and hash are not re-hashed).
#
# Failure policy: a file that fails its size or sha256 check is never left under its final name.
# During a download, the .incomplete file is deleted, so the next run fetches it from the start
# (a corrupt prefix is never resumed). In step 5 a mismatching file is renamed to <path>.incomplete
# when the listing has a sha256 for it (the next run re-checks it and re-fetches it if it differs),
# and deleted otherwise.
#
# Manifest format (assumed: the output of `sha256sum`): one "<64 hex>  <relative path>" per line;
# "<hex> *<path>" (binary mode) is accepted, blank lines and lines starting with # are ignored.
set -euo pipefail

MODEL_REPO="${MODEL_REPO:-0xSero/DeepSeek-V4.1-Flash-Spark}"
REVISION="${REVISION:-main}"
MODEL_DIR="${MODEL_DIR:-$HOME/models/DeepSeek-V4.1-Flash-Spark}"
HF_ENDPOINT="${HF_ENDPOINT:-https://huggingface.co}"
HF_ENDPOINT="${HF_ENDPOINT%/}"
HF_TOKEN="${HF_TOKEN:-}"
KEEP_PARTS="${KEEP_PARTS:-0}"
MANIFEST="${MANIFEST:-sha256-manifest.txt}"
CURL_RETRIES="${CURL_RETRIES:-5}"

SCRIPT_NAME=download.sh
# shellcheck source=scripts/lib/deploy_common.sh
source "$(dirname "$0")/lib/deploy_common.sh"
no_args_or_help "$@"

log() { printf '%s\n' "$*"; }
warn() { printf 'download.sh: %s\n' "$*" >&2; }
die() { printf 'download.sh: error: %s\n' "$*" >&2; exit 1; }

for tool in curl python3 sha256sum df stat; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed"
done
[[ $CURL_RETRIES =~ ^[0-9]+$ ]] || die "CURL_RETRIES must be a number, got '$CURL_RETRIES'"
[[ $KEEP_PARTS == 0 || $KEEP_PARTS == 1 ]] || die "KEEP_PARTS must be 0 or 1, got '$KEEP_PARTS'"
if [[ -n ${DSV41_DOWNLOAD_FREE_BYTES:-} && ! $DSV41_DOWNLOAD_FREE_BYTES =~ ^[0-9]+$ ]]; then
  die "DSV41_DOWNLOAD_FREE_BYTES must be a number of bytes"
fi

mkdir -p -- "$MODEL_DIR"
MODEL_DIR="$(cd -- "$MODEL_DIR" && pwd)"
state="$MODEL_DIR/.dsv41-download"
mkdir -p -- "$state"
tmp="$(mktemp -d)"  # mode 0700: holds the auth header and the listing pages
trap 'rm -rf -- "$tmp"' EXIT

# JSON and URL handling (stdlib only). Subcommands:
#   quote S            S percent-encoded as one URL path segment
#   next HDRS URL      the rel="next" target of the last response's Link header in HDRS, or nothing
#   entries PAGE...    one "path<TAB>size<TAB>sha256|-<TAB>url-path" line per listed file
read -r -d '' PY <<'EOF' || true
import json, re, sys, urllib.parse
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "quote":
    print(urllib.parse.quote(args[0], safe=""))
elif cmd == "next":
    text = open(args[0], encoding="latin-1").read().replace("\r", "")
    blocks = [b for b in re.split(r"\n(?=HTTP/)", text) if b.startswith("HTTP/")]
    for line in (blocks[-1] if blocks else "").split("\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() != "link":
            continue
        for target, params in re.findall(r"<([^>]*)>([^,]*)", value):
            if re.search(r'rel\s*=\s*"?next"?', params):
                print(urllib.parse.urljoin(args[1], target))
                sys.exit(0)
elif cmd == "entries":
    seen = set()
    for page in args:
        try:
            data = json.load(open(page, encoding="utf-8"))
        except ValueError as e:
            sys.exit(f"the file list is not JSON ({e})")
        if not isinstance(data, list):
            sys.exit(f"the file list is not a JSON array: {str(data)[:200]}")
        for e in data:
            if not isinstance(e, dict) or e.get("type") != "file":
                continue
            path = e.get("path", "")
            parts = path.split("/")
            # A listing must not be able to write outside MODEL_DIR or break the TSV.
            if (not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts)
                    or any(c in path for c in "\t\n\r")):
                sys.exit(f"unsafe path in the file list: {path!r}")
            if path == ".gitattributes" or path in seen:
                continue
            seen.add(path)
            lfs = e.get("lfs") or {}
            size = lfs.get("size", e.get("size"))
            if not isinstance(size, int) or size < 0:
                sys.exit(f"no size for {path} in the file list")
            oid = str(lfs.get("oid") or "-").removeprefix("sha256:").lower()
            print(f"{path}\t{size}\t{oid}\t{urllib.parse.quote(path, safe='/')}")
EOF

# Bytes as GB (decimal, two places), as df and the hub count them.
fmt_gb() { printf '%d.%02d GB' $(($1 / 1000000000)) $((($1 % 1000000000) / 10000000)); }
fmt_size() {
  if (($1 >= 1000000000)); then fmt_gb "$1"
  elif (($1 >= 1000000)); then printf '%d.%d MB' $(($1 / 1000000)) $((($1 % 1000000) / 100000))
  else printf '%d kB' $((($1 + 999) / 1000)); fi
}
file_size() { stat -c %s -- "$1" 2>/dev/null || echo -1; }
hash_file() { local h; h="$(sha256sum <"$1")"; printf '%s' "${h%% *}"; }

# Stamps: "<sha256> <size>" of a verified file, kept outside the model's own paths.
write_stamp() {  # rel hash size
  local s="$state/$1.sha256"
  mkdir -p -- "$(dirname -- "$s")"
  printf '%s %s\n' "$2" "$3" >"$s.tmp" && mv -f -- "$s.tmp" "$s"
}
stamp_hash=""
stamp_size=""
read_stamp() {  # rel -> stamp_hash, stamp_size; fails when there is none
  local s="$state/$1.sha256"
  stamp_hash=""; stamp_size=""
  [[ -f $s ]] || return 1
  read -r stamp_hash stamp_size <"$s" || true
  [[ -n $stamp_hash && -n $stamp_size ]]
}
# rel size want-hash ("-" = any): the final file exists with that size and a matching stamp.
is_stamped() {
  [[ -f "$MODEL_DIR/$1" ]] && (($(file_size "$MODEL_DIR/$1") == $2)) || return 1
  read_stamp "$1" && ((stamp_size == $2)) && [[ $3 == - || $stamp_hash == "$3" ]]
}

rev_q="$(python3 -c "$PY" quote "$REVISION")"
resolve_base="$HF_ENDPOINT/$MODEL_REPO/resolve/$rev_q"
auth=()
if [[ -n $HF_TOKEN ]]; then
  # From a file, so the token never shows in the process list.
  printf 'Authorization: Bearer %s\n' "$HF_TOKEN" >"$tmp/auth"
  auth=(-H "@$tmp/auth")
fi
if [[ -t 2 ]]; then progress=(--progress-bar); else progress=(--silent --show-error); fi
# A connection that stays open but stops sending (under 1 kB/s for 60 s) fails with curl exit 28,
# which the resume loop below retries, instead of hanging the download for good.
curl_common=(--fail --location --retry "$CURL_RETRIES" --connect-timeout 30 --speed-limit 1024
  --speed-time 60 -A dsv41-download/1)

# Dies with a message fitting an HTTP error status. code url what-for-404
http_fail() {
  case "$1" in
    401|403)
      if [[ -n $HF_TOKEN ]]; then
        die "HTTP $1 for $2: access denied. HF_TOKEN is set but cannot read $MODEL_REPO; set HF_TOKEN to a token with access (https://huggingface.co/settings/tokens) and accept the model's terms on its page"
      fi
      die "HTTP $1 for $2: access denied. Set HF_TOKEN to a Hugging Face access token that can read $MODEL_REPO (https://huggingface.co/settings/tokens), and check that MODEL_REPO is right" ;;
    404) die "$3 (HTTP 404 for $2)" ;;
    *) die "HTTP $1 for $2" ;;
  esac
}

# ---- 1. the file list -----------------------------------------------------------------------
log "listing $MODEL_REPO@$REVISION from $HF_ENDPOINT"
url="$HF_ENDPOINT/api/models/$MODEL_REPO/tree/$rev_q?recursive=true"
pages=()
while [[ -n $url ]]; do
  n=$((${#pages[@]} + 1))
  rc=0
  code="$(curl "${curl_common[@]}" --silent --show-error "${auth[@]}" -D "$tmp/page$n.hdr" \
    -o "$tmp/page$n.json" -w '%{http_code}' -- "$url")" || rc=$?
  ((rc == 22)) && http_fail "$code" "$url" "repository $MODEL_REPO or revision $REVISION not found"
  ((rc == 0)) || die "could not fetch the file list from $url (curl exit $rc)"
  pages+=("$tmp/page$n.json")
  url="$(python3 -c "$PY" next "$tmp/page$n.hdr" "$url")"
  ((n < 100000)) || die "the file list has more than 100000 pages"
done
python3 -c "$PY" entries "${pages[@]}" >"$tmp/listing.tsv" || die "bad file list from $HF_ENDPOINT"

F_PATH=(); F_SIZE=(); F_OID=(); F_URL=()
declare -A IS_LISTED=() G_TOTAL=() G_PARTS=()
G_ORDER=(); REGULAR=()
while IFS=$'\t' read -r p s o u; do
  i=${#F_PATH[@]}
  F_PATH+=("$p"); F_SIZE+=("$s"); F_OID+=("$o"); F_URL+=("$u")
  IS_LISTED[$p]=$i
done <"$tmp/listing.tsv"
((${#F_PATH[@]} > 0)) || die "the file list of $MODEL_REPO@$REVISION is empty"
for i in "${!F_PATH[@]}"; do
  p=${F_PATH[$i]}
  if [[ $p =~ ^(.+)\.part([0-9]+)$ ]]; then
    b=${BASH_REMATCH[1]}
    [[ -z ${IS_LISTED[$b]+x} ]] || die "the repository has both $b and its pieces ($p)"
    [[ -n ${G_TOTAL[$b]+x} ]] || { G_ORDER+=("$b"); G_TOTAL[$b]=0; G_PARTS[$b]=""; }
    G_TOTAL[$b]=$((${G_TOTAL[$b]} + ${F_SIZE[$i]}))
    G_PARTS[$b]+="$((10#${BASH_REMATCH[2]})) $i"$'\n'
  elif [[ $p == "$MANIFEST" ]]; then
    REGULAR=("$i" "${REGULAR[@]}")  # first: the groups need it
  else
    REGULAR+=("$i")
  fi
done
# Each group's listing indices in numeric part order; a gap in the numbering is an error.
declare -A G_SORTED=()
for b in "${G_ORDER[@]}"; do
  expect=""; G_SORTED[$b]=""
  while read -r idx i; do
    [[ -z $expect ]] || ((idx == expect)) || die "$b: piece number $expect is not in the file list (next listed: ${F_PATH[$i]})"
    expect=$((idx + 1))
    G_SORTED[$b]+="$i "
  done < <(printf '%s' "${G_PARTS[$b]}" | sort -n -k1,1)
done
log "${#F_PATH[@]} files, $(fmt_size "$(($(printf '%s+' "${F_SIZE[@]}")0))"), ${#G_ORDER[@]} shards in pieces"

# ---- 2. free space --------------------------------------------------------------------------
# Bytes a listed file still needs: 0 when it is present in full (stamped, or to be adopted by
# hashing it), else its size less what an .incomplete already holds.
still_needed() {
  local rel=${F_PATH[$1]} size=${F_SIZE[$1]} have
  if (($(file_size "$MODEL_DIR/$rel") == size)) && { [[ ${F_OID[$1]} != - ]] || is_stamped "$rel" "$size" -; }; then
    echo 0; return
  fi
  have=$(file_size "$MODEL_DIR/$rel.incomplete")
  ((have >= 0 && have <= size)) || have=0
  echo $((size - have))
}
need=0
for i in "${REGULAR[@]}"; do need=$((need + $(still_needed "$i"))); done
for b in "${G_ORDER[@]}"; do
  (($(file_size "$MODEL_DIR/$b") == ${G_TOTAL[$b]})) && continue
  need=$((need + ${G_TOTAL[$b]}))
  for i in ${G_SORTED[$b]}; do need=$((need + $(still_needed "$i"))); done
done
if [[ -n ${DSV41_DOWNLOAD_FREE_BYTES:-} ]]; then
  free=$DSV41_DOWNLOAD_FREE_BYTES
else
  free="$(df -B1 --output=avail -- "$MODEL_DIR" | tail -n 1 | tr -d ' ')"
fi
if ((need > free)); then
  die "not enough free space in $MODEL_DIR: need $(fmt_gb "$need") ($need bytes), only $(fmt_gb "$free") ($free bytes) free"
fi
log "need $(fmt_gb "$need") of $(fmt_gb "$free") free in $MODEL_DIR"

# ---- 3. files -------------------------------------------------------------------------------
n_down=0; n_skip=0; fetched=0; n_done=0
n_total=${#F_PATH[@]}

# Fetches listed file i into <path>.incomplete, verifies it, renames it and stamps it.
download_file() {
  local rel=${F_PATH[$1]} size=${F_SIZE[$1]} oid=${F_OID[$1]}
  local dest="$MODEL_DIR/${F_PATH[$1]}" url="$resolve_base/${F_URL[$1]}"
  local part="$dest.incomplete" attempt=0 have rc out actual
  mkdir -p -- "$(dirname -- "$dest")"
  # A full-size leftover (a run stopped before verifying, or step 5 moved a mismatching file
  # here) that fails its hash is fetched again now rather than failing this run.
  if [[ $oid != - ]] && (($(file_size "$part") == size)) && [[ "$(hash_file "$part")" != "$oid" ]]; then
    warn "$rel: $rel.incomplete does not match its sha256; fetching it again from the start"
    rm -f -- "$part"
  fi
  while :; do
    have=$(file_size "$part")
    if ((have > size)); then rm -f -- "$part"; have=0; fi  # cannot be a prefix of the file
    ((have == size)) && break  # complete already (a run stopped before verifying)
    if ((size == 0)); then : >"$part"; break; fi
    rc=0
    out="$(curl "${curl_common[@]}" "${progress[@]}" "${auth[@]}" -C - -o "$part" \
      -w '%{http_code} %{size_download}' -- "$url")" || rc=$?
    [[ $out =~ ^[0-9]+\ [0-9]+$ ]] || out="000 0"
    fetched=$((fetched + ${out##* }))
    ((rc == 0)) && break
    if ((rc == 22)); then
      if [[ ${out%% *} == 416 ]]; then
        rm -f -- "$part"
        die "$rel: the server refused to resume at byte $have (HTTP 416 for $url); removed $rel.incomplete, re-run to fetch it from the start"
      fi
      http_fail "${out%% *}" "$url" "$rel not found in $MODEL_REPO at revision $REVISION"
    fi
    ((rc == 33)) && rm -f -- "$part"  # the server ignored the Range request: start over
    attempt=$((attempt + 1))
    ((attempt <= CURL_RETRIES)) || die "$rel: download failed (curl exit $rc) after $attempt attempts; re-run to resume it ($(file_size "$part") of $size bytes kept in $rel.incomplete)"
    warn "$rel: transfer interrupted (curl exit $rc) at $(file_size "$part") of $size bytes; resuming (retry $attempt of $CURL_RETRIES)"
    sleep $((attempt < 10 ? attempt : 10))
  done
  actual=$(file_size "$part")
  if ((actual != size)); then
    rm -f -- "$part"
    die "$rel: size mismatch: expected $size bytes, got $actual; removed $rel.incomplete, the next run fetches it from the start"
  fi
  actual="$(hash_file "$part")"
  if [[ $oid != - && $actual != "$oid" ]]; then
    rm -f -- "$part"
    die "$rel: sha256 mismatch: expected $oid, got $actual; removed $rel.incomplete, the next run fetches it from the start"
  fi
  mv -f -- "$part" "$dest"
  write_stamp "$rel" "$actual" "$size"
}

# Makes listed file i present and verified, downloading only when needed.
ensure_file() {
  local rel=${F_PATH[$1]} size=${F_SIZE[$1]} oid=${F_OID[$1]} dest actual
  dest="$MODEL_DIR/$rel"
  n_done=$((n_done + 1))
  if is_stamped "$rel" "$size" "$oid"; then n_skip=$((n_skip + 1)); return; fi
  if [[ $oid != - ]] && (($(file_size "$dest") == size)); then
    log "[$n_done/$n_total] $rel: present without a stamp, checking its sha256"
    actual="$(hash_file "$dest")"
    if [[ $actual == "$oid" ]]; then
      write_stamp "$rel" "$actual" "$size"; n_skip=$((n_skip + 1)); return
    fi
    warn "$rel: sha256 mismatch (expected $oid, got $actual); removed it, fetching it again"
    rm -f -- "$dest"
  fi
  log "[$n_done/$n_total] $rel ($(fmt_size "$size"))"
  download_file "$1"
  n_down=$((n_down + 1))
}

for i in "${REGULAR[@]}"; do ensure_file "$i"; done

# ---- manifest -------------------------------------------------------------------------------
if [[ $MANIFEST == /* ]]; then manifest_file=$MANIFEST; else manifest_file="$MODEL_DIR/$MANIFEST"; fi
[[ -f $manifest_file ]] || die "manifest $MANIFEST is not in $MODEL_REPO@$REVISION nor at $manifest_file"
declare -A M_HASH=()
M_ORDER=()
while IFS= read -r line || [[ -n $line ]]; do
  line=${line%$'\r'}
  [[ -z ${line//[[:space:]]/} || $line == \#* ]] && continue
  [[ $line =~ ^([0-9a-fA-F]{64})[[:space:]][[:space:]*]?(.+)$ ]] || die "$MANIFEST: not a sha256sum line: $line"
  p=${BASH_REMATCH[2]}; p=${p#./}
  # Step 5 may delete a mismatching file: never outside MODEL_DIR.
  [[ $p != /* && /$p/ != */../* ]] || die "$MANIFEST: path outside the model directory: $p"
  [[ -n ${M_HASH[$p]+x} ]] || M_ORDER+=("$p")
  M_HASH[$p]=${BASH_REMATCH[1],,}
done <"$manifest_file"
for b in "${G_ORDER[@]}"; do
  [[ -n ${M_HASH[$b]+x} ]] || die "$MANIFEST has no entry for $b (reassembled from its .partNN pieces), so it cannot be verified"
done

# ---- 4. part groups -------------------------------------------------------------------------
delete_parts() {
  ((KEEP_PARTS == 1)) && return
  local i
  for i in ${G_SORTED[$1]}; do
    rm -f -- "$MODEL_DIR/${F_PATH[$i]}" "$state/${F_PATH[$i]}.sha256"
  done
}
for b in "${G_ORDER[@]}"; do
  total=${G_TOTAL[$b]}
  read -ra idxs <<<"${G_SORTED[$b]}"
  if is_stamped "$b" "$total" "${M_HASH[$b]}"; then
    n_skip=$((n_skip + ${#idxs[@]})); n_done=$((n_done + ${#idxs[@]}))
    delete_parts "$b"  # a run that stopped after the stamp may have left them
    continue
  fi
  if (($(file_size "$MODEL_DIR/$b") == total)); then
    log "$b: present without a stamp, checking its sha256"
    actual="$(hash_file "$MODEL_DIR/$b")"
    if [[ $actual == "${M_HASH[$b]}" ]]; then
      write_stamp "$b" "$actual" "$total"
      n_skip=$((n_skip + ${#idxs[@]})); n_done=$((n_done + ${#idxs[@]}))
      delete_parts "$b"
      continue
    fi
    warn "$b: sha256 mismatch (expected ${M_HASH[$b]}, got $actual); removed it, reassembling it again"
    rm -f -- "$MODEL_DIR/$b"
  fi
  for i in "${idxs[@]}"; do ensure_file "$i"; done
  log "$b: reassembling from ${#idxs[@]} pieces ($(fmt_size "$total"))"
  files=()
  for i in "${idxs[@]}"; do files+=("$MODEL_DIR/${F_PATH[$i]}"); done
  # Hash while writing: one read of the pieces instead of two (about 100 GB on the real model).
  actual="$(cat -- "${files[@]}" | tee -- "$MODEL_DIR/$b.incomplete" | sha256sum)" ||
    die "$b: reassembly into $b.incomplete failed (disk full?)"
  actual=${actual%% *}
  if [[ $actual != "${M_HASH[$b]}" ]]; then
    rm -f -- "$MODEL_DIR/$b.incomplete"
    die "$b: sha256 mismatch after reassembly: expected ${M_HASH[$b]} ($MANIFEST), got $actual; the pieces were kept"
  fi
  mv -f -- "$MODEL_DIR/$b.incomplete" "$MODEL_DIR/$b"
  write_stamp "$b" "$actual" "$total"
  delete_parts "$b"
done

# ---- 5. the manifest ------------------------------------------------------------------------
n_ok=0; failed=()
for p in "${M_ORDER[@]}"; do
  f="$MODEL_DIR/$p"
  if [[ ! -f $f ]]; then failed+=("$p: listed in $MANIFEST but missing from $MODEL_DIR"); continue; fi
  size=$(file_size "$f")
  if read_stamp "$p" && ((stamp_size == size)) && [[ $stamp_hash == "${M_HASH[$p]}" ]]; then
    n_ok=$((n_ok + 1)); continue
  fi
  log "verifying $p ($(fmt_size "$size"))"
  actual="$(hash_file "$f")"
  if [[ $actual == "${M_HASH[$p]}" ]]; then
    write_stamp "$p" "$actual" "$size"; n_ok=$((n_ok + 1)); continue
  fi
  rm -f -- "$state/$p.sha256"
  if [[ -n ${IS_LISTED[$p]+x} && ${F_OID[${IS_LISTED[$p]}]} != - ]]; then
    mv -f -- "$f" "$f.incomplete"; what="moved to $p.incomplete"
  else
    rm -f -- "$f"; what="removed"
  fi
  failed+=("$p: sha256 mismatch: expected ${M_HASH[$p]} ($MANIFEST), got $actual; $what")
done
for msg in "${failed[@]}"; do warn "error: $msg"; done

log "summary: $n_down downloaded, $n_skip skipped, $(fmt_size "$fetched") fetched, $n_ok of ${#M_ORDER[@]} manifest files verified"
((${#failed[@]} == 0)) || die "${#failed[@]} manifest file(s) failed verification (listed above)"
log "model ready in $MODEL_DIR"
