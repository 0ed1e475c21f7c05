#!/usr/bin/env bash
# Memory guard for unified-memory hosts (DGX Spark: CPU and GPU share 128 GB). When MemAvailable
# reaches zero such a host can hang instead of killing the process, so this stops the serving
# processes first: once MemAvailable stays below MEMGUARD_GIB for MEMGUARD_SAMPLES consecutive
# samples, every process named by the pid files gets SIGTERM, then SIGKILL after
# MEMGUARD_KILL_AFTER_S. scripts/launch.sh starts one per node (docs/deploy.md).
#
#   scripts/memguard.sh PIDFILE [PIDFILE ...]
#
# Environment (defaults):
#   MEMGUARD_GIB=1            threshold in GiB (fractions allowed, e.g. 1.5)
#   MEMGUARD_INTERVAL_S=1     seconds between samples
#   MEMGUARD_SAMPLES=2        consecutive samples below the threshold before it fires
#   MEMGUARD_KILL_AFTER_S=10  SIGTERM -> SIGKILL grace
#   MEMGUARD_LOG=            log file (appended; default stderr only)
#   MEMGUARD_MEMINFO=/proc/meminfo   (test hook: a file with a MemAvailable line)
#
# Exits 0 when every watched process is gone (nothing left to guard) or after firing; 2 on bad
# arguments. It only signals a pid whose /proc/PID/cmdline still names the program it had when
# the guard started (a recycled pid is left alone).
set -euo pipefail

gib="${MEMGUARD_GIB:-1}"
interval="${MEMGUARD_INTERVAL_S:-1}"
samples="${MEMGUARD_SAMPLES:-2}"
grace="${MEMGUARD_KILL_AFTER_S:-10}"
log_file="${MEMGUARD_LOG:-}"
meminfo="${MEMGUARD_MEMINFO:-/proc/meminfo}"

log() {
  local line
  line="$(date '+%Y-%m-%dT%H:%M:%S') memguard[$$]: $*"
  echo "$line" >&2
  if [ -n "$log_file" ]; then echo "$line" >>"$log_file"; fi
}

# Also into the log: the launcher starts the guard with its output discarded.
die() {
  echo "memguard: $*" >&2
  if [ -n "$log_file" ]; then echo "$(date '+%Y-%m-%dT%H:%M:%S') memguard[$$]: $*" >>"$log_file"; fi
  exit 2
}

# Standalone (launch.sh copies this one file to the worker): no shared library sourced.
case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
esac

[ $# -ge 1 ] || die "usage: memguard.sh PIDFILE [PIDFILE ...]"
[[ "$gib" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "MEMGUARD_GIB='$gib' is not a number of GiB"
[[ "$interval" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "MEMGUARD_INTERVAL_S='$interval' is not a number"
[[ "$samples" =~ ^[1-9][0-9]*$ ]] || die "MEMGUARD_SAMPLES='$samples' is not a positive integer"
[[ "$grace" =~ ^[0-9]+$ ]] || die "MEMGUARD_KILL_AFTER_S='$grace' is not a whole number"
[ -r "$meminfo" ] || die "cannot read $meminfo"
# kB, as /proc/meminfo counts.
threshold_kb="$(awk -v g="$gib" 'BEGIN { printf "%d", g * 1024 * 1024 }')"

mem_available_kb() {
  awk '$1 == "MemAvailable:" { print $2; found = 1 } END { if (!found) exit 1 }' "$meminfo"
}
mem_available_kb >/dev/null || die "$meminfo has no MemAvailable line"

# pid -> the cmdline it had at start (argv[0] is enough to tell a recycled pid).
declare -A watched=()
for f in "$@"; do
  [ -r "$f" ] || die "pid file '$f' is not readable"
  pid="$(tr -dc '0-9' <"$f")"
  [ -n "$pid" ] || die "pid file '$f' holds no pid"
  if [ -r "/proc/$pid/cmdline" ]; then
    watched[$pid]="$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n 1)"
  else
    log "pid $pid (from $f) is not running; not watched"
  fi
done

alive() {  # pid still runs the program it ran at start
  local pid=$1 now
  [ -r "/proc/$pid/cmdline" ] || return 1
  now="$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n 1)"
  [ "$now" = "${watched[$pid]}" ]
}

log "watching pids ${!watched[*]} (threshold ${gib} GiB MemAvailable, every ${interval} s," \
  "fires after ${samples} samples)"
below=0
while :; do
  live=0
  for pid in "${!watched[@]}"; do alive "$pid" && live=$((live + 1)); done
  if [ "$live" -eq 0 ]; then
    log "no watched process is left; exiting"
    exit 0
  fi
  avail_kb="$(mem_available_kb)"
  if [ "$avail_kb" -lt "$threshold_kb" ]; then below=$((below + 1)); else below=0; fi
  if [ "$below" -ge "$samples" ]; then
    log "MemAvailable $((avail_kb / 1024)) MiB < ${gib} GiB for ${samples} samples: stopping" \
      "pids ${!watched[*]} (lower KV_BYTES / MAX_CONTEXT before raising MEMGUARD_GIB)"
    for pid in "${!watched[@]}"; do
      if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
    done
    for ((waited = 0; waited < grace * 10; waited++)); do
      live=0
      for pid in "${!watched[@]}"; do alive "$pid" && live=$((live + 1)); done
      [ "$live" -eq 0 ] && break
      sleep 0.1
    done
    for pid in "${!watched[@]}"; do
      if alive "$pid"; then
        log "pid $pid still running after ${grace} s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
    log "fired; exiting"
    exit 0
  fi
  sleep "$interval"
done
