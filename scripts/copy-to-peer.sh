#!/usr/bin/env bash
# Copies the downloaded model to the worker over the fabric (seed.md step 3, docs/deploy.md), with
# rsync over SSH: resumable (a re-run sends only what is missing or different, partial files are
# kept), and every file sent is checked by rsync's whole-file checksum on arrival.
#
#   WORKER=user@10.10.10.11 scripts/copy-to-peer.sh
#
# Environment (defaults):
#   WORKER              SSH target of the worker on the fabric address (required)
#   MODEL_DIR           ~/models/DeepSeek-V4.1-Flash-Spark
#   WORKER_MODEL_DIR    = MODEL_DIR (the same path on the worker; ~/x = x in the worker's home)
#   VERIFY=0            1: afterwards run `sha256sum -c` of the manifest on the worker (reads
#                       every byte there again: ~462 GB)
#   MANIFEST            sha256-manifest.txt (relative to MODEL_DIR)
#   SSH="ssh -o BatchMode=yes"   how to reach the worker (tests use a local fake)
# Files on the worker that the head lacks are left alone. Not copied: download leftovers (*.incomplete, *.partNN pieces, .dsv41-download/ stamps).
set -euo pipefail

MODEL_DIR="${MODEL_DIR:-$HOME/models/DeepSeek-V4.1-Flash-Spark}"
WORKER_MODEL_DIR="${WORKER_MODEL_DIR:-$MODEL_DIR}"
MANIFEST="${MANIFEST:-sha256-manifest.txt}"
SSH="${SSH:-ssh -o BatchMode=yes}"
read -r -a SSH_CMD <<<"$SSH"

SCRIPT_NAME=copy-to-peer.sh
# shellcheck source=scripts/lib/deploy_common.sh
source "$(dirname "$0")/lib/deploy_common.sh"
die() {
  echo "$SCRIPT_NAME: $*" >&2
  exit 1
}
no_args_or_help "$@"
WORKER_MODEL_DIR="$(worker_path "$WORKER_MODEL_DIR" WORKER_MODEL_DIR)" || exit 1
quote() { printf '%q ' "$@"; }
on_worker() { "${SSH_CMD[@]}" "$WORKER" bash -s <<<"$1"; }

[ -n "${WORKER:-}" ] || die "set WORKER to the worker's SSH target on the fabric (e.g. WORKER=user@10.10.10.11)"
[ -f "$MODEL_DIR/config.json" ] || die "MODEL_DIR=$MODEL_DIR has no config.json (run scripts/download.sh first)"
unfinished="$(find "$MODEL_DIR" -name '*.incomplete' -print -quit)"
[ -z "$unfinished" ] || die "$MODEL_DIR holds unfinished downloads ($unfinished): re-run scripts/download.sh first"
command -v rsync >/dev/null || die "rsync is not installed here (apt-get install rsync)"
on_worker true || die "cannot reach the worker with: $SSH $WORKER"
on_worker "command -v rsync >/dev/null" || die "rsync is not installed on $WORKER (apt-get install rsync there)"

excludes=(--exclude '*.incomplete' --exclude '*.part[0-9]' --exclude '*.part[0-9][0-9]'
  --exclude '*.part[0-9][0-9][0-9]' --exclude '/.dsv41-download/')

# Space: what rsync would send (a dry run against the worker's copy) vs what is free there.
need="$(rsync -a --dry-run --stats -e "$SSH" "${excludes[@]}" "$MODEL_DIR/" \
  "$WORKER:$WORKER_MODEL_DIR/" 2>/dev/null | awk -F': ' '/^Total transferred file size/ { gsub(/[^0-9]/, "", $2); print $2 }')" ||
  need=""
free="$(on_worker "d=$(quote "$WORKER_MODEL_DIR"); while [ ! -d \"\$d\" ]; do d=\$(dirname \"\$d\"); done; df -B1 --output=avail \"\$d\" | tail -n 1")" ||
  free=""
if [ -n "$need" ] && [ -n "$free" ] && [ "$need" -gt "$free" ]; then
  die "$WORKER has $free bytes ($((free / 1000000000)) GB) free for $WORKER_MODEL_DIR but the copy needs $need bytes ($((need / 1000000000)) GB) more"
fi

echo "copy-to-peer.sh: $MODEL_DIR/ -> $WORKER:$WORKER_MODEL_DIR/ (${need:-?} bytes to send)"
on_worker "mkdir -p $(quote "$WORKER_MODEL_DIR")" || die "cannot create $WORKER_MODEL_DIR on $WORKER"
progress=()
[ -t 1 ] && progress=(--info=progress2)
# No --delete: a mistyped WORKER_MODEL_DIR must never cost the worker its files.
rsync -a --partial --stats -e "$SSH" "${excludes[@]}" ${progress[@]+"${progress[@]}"} \
  "$MODEL_DIR/" "$WORKER:$WORKER_MODEL_DIR/" ||
  die "rsync failed (exit $?); re-run to resume"

if [ "${VERIFY:-0}" = 1 ]; then
  [ -f "$MODEL_DIR/$MANIFEST" ] || die "VERIFY=1 but $MODEL_DIR/$MANIFEST does not exist"
  echo "copy-to-peer.sh: verifying on $WORKER against $MANIFEST"
  # Success is sha256sum's exit status, not silence: a dropped SSH session prints nothing too.
  rc=0
  bad="$(on_worker "cd $(quote "$WORKER_MODEL_DIR") && sha256sum -c --quiet $(quote "$MANIFEST") 2>&1")" || rc=$?
  [ "$rc" = 0 ] || die "the worker's copy fails $MANIFEST (exit $rc):
${bad:-(no output: the SSH session or sha256sum failed)}
(delete the files named above on $WORKER and re-run, or re-run VERIFY=1 if the session dropped)"
  echo "copy-to-peer.sh: every file of $MANIFEST matches on $WORKER"
fi
echo "copy-to-peer.sh: done"
