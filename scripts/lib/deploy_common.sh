# shellcheck shell=bash
# Shared by the deployment scripts run from the checkout (download.sh, copy-to-peer.sh,
# launch.sh; memguard.sh stays standalone: it is copied to the worker alone): sourced, not run. Each script sets SCRIPT_NAME first (the prefix of its messages).

# Prints the calling script's header comment (its usage and settings): lines 2.. up to the
# `set -euo pipefail` line, without the leading "# ".
print_header() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

# For scripts configured by the environment only: -h / --help prints the header and exits 0;
# any other argument is a usage error (exit 2).
no_args_or_help() {
  case "${1:-}" in
    -h | --help) print_header; exit 0 ;;
    "") ;;
    *)
      echo "$SCRIPT_NAME: no arguments (settings come from the environment; -h lists them)" >&2
      exit 2
      ;;
  esac
}

# A path on the worker as remote commands there use it: "~/x" is x relative to the worker
# user's home (where ssh, rsync and every remote command start); "~user/..." is refused rather
# than quoted into a literal "~" directory. $2 names the setting in the error.
worker_path() {
  local p=$1
  # shellcheck disable=SC2088  # a literal "~/" prefix given by the user
  case "$p" in
    "~") p=. ;;
    "~/"*) p=${p#"~/"} ;;
    "~"*)
      echo "$SCRIPT_NAME: $2=$p: use an absolute path or one relative to the worker user's home" >&2
      return 1
      ;;
  esac
  echo "$p"
}
