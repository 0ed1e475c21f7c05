#!/usr/bin/env bash
# Stands in for `ssh` in the deployment tests: drops ssh's options and the host, then runs the
# remote command line here, in $FAKE_SSH_HOME (the "worker's home"), with stdin passed through —
# what sshd does with a command. FAKE_NODE=worker tells stub commands which node they run on;
# FAKE_SSH_LOG (optional) records "host command" per call.
set -euo pipefail
while [ $# -gt 0 ]; do
  case "$1" in
    -o | -p | -i | -l | -F | -J) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "fake_ssh: no host" >&2; exit 255; }
host="$1"
shift
if [ -n "${FAKE_SSH_LOG:-}" ]; then echo "$host $*" >>"$FAKE_SSH_LOG"; fi
cd "${FAKE_SSH_HOME:?set FAKE_SSH_HOME}"
export FAKE_NODE=worker
exec bash -c "$*"
