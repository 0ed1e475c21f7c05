#!/usr/bin/env bash
# Stands in for `ssh` in the deployment tests: drops ssh's options and the host, then runs the
# remote command line here, in $FAKE_SSH_HOME (the "worker's home", also its $HOME), with stdin
# passed through and a fresh environment — what sshd does with a command: nothing of the
# caller's environment (DSV41_*, MEMGUARD_*, HOME) reaches the "worker" except PATH (for the
# test's stubs) and FAKE_* switches. FAKE_NODE=worker tells stub commands which node they run
# on; FAKE_SSH_LOG (optional) records "host command" per call. FAKE_SSH_DROP_FROM=TEXT: the first
# call whose command contains TEXT and every later one fail as a lost connection (exit 255).
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
if [ -n "${FAKE_SSH_DROP_FROM:-}" ]; then
  [ ! -e .fake_ssh_dropped ] || exit 255
  # launch.sh sends its scripts on stdin (bash -s) and files as raw bytes: keep stdin in a file.
  stdin_copy="$(mktemp)"
  cat >"$stdin_copy"
  exec 3<"$stdin_copy"
  rm -f "$stdin_copy"
  if [[ "$*" == *"$FAKE_SSH_DROP_FROM"* ]] || grep -qF -- "$FAKE_SSH_DROP_FROM" /dev/fd/3; then
    touch .fake_ssh_dropped
    exit 255
  fi
  exec 0<&3 3<&-  # (grep read its own open of the file: stdin starts at byte 0)
fi
keep=(HOME="$FAKE_SSH_HOME" PATH="$PATH" FAKE_NODE=worker)
while IFS='=' read -r name _; do
  case "$name" in FAKE_*) [ "$name" = FAKE_NODE ] || keep+=("$name=${!name}") ;; esac
done < <(env)
exec env -i "${keep[@]}" bash -c "$*"
