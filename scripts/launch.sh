#!/usr/bin/env bash
# Two-node launcher (seed.md step 5, docs/deploy.md): rank 1 (follower) on the worker over SSH,
# rank 0 (scheduler + OpenAI-compatible HTTP) here on the head, a memory guard on both nodes, then
# waits until /health answers 200.
#
#   scripts/launch.sh [start]        start both ranks and wait for the API
#   scripts/launch.sh status         ranks, guards and /health (exit 0 only when healthy)
#   scripts/launch.sh logs r0|r1     last LINES (100) lines of a rank's log
#   scripts/launch.sh stop           rank 0 first (it tells rank 1 to stop), then leftovers
#   scripts/launch.sh detect         the fabric address/interface/HCA chosen on each node
#
# Environment (defaults):
#   WORKER                  SSH target of the worker on the fabric, e.g. user@10.10.10.11 (required)
#   MODEL_DIR               ~/models/DeepSeek-V4.1-Flash-Spark      WORKER_MODEL_DIR  = MODEL_DIR
#   STATE_DIR               ~/.dsv41-two-sparks (api_key, logs, pids)
#   WORKER_STATE_DIR        .dsv41-two-sparks (relative = the worker user's home)
#   SERVER_BIN              build/server/dsv41-server of this checkout; copied to the worker's
#                           WORKER_STATE_DIR/bin when it differs (same OS/arch on both Sparks)
#   HEAD_IP / WORKER_IP     fabric IPv4 of each node; default: the IPv4 of the first netdev of an
#   HEAD_IFNAME / WORKER_IFNAME   ACTIVE RDMA port (`rdma link`), or of the named interface
#   HEAD_HCAS / WORKER_HCAS RDMA device for RDMA=1 (default: the detected port's device)
#   RDMA=0                  1: one-shot all-reduce over RoCE (DSV41_TP_IB_DEVICE; UNVERIFIED on
#                           hardware, docs/tp.md); 0: the TP link's TCP path over the fabric IPs
#   HOST=0.0.0.0 PORT=8000  HTTP of rank 0          TP_PORT=29500   rank 0's TP listener
#   BACKEND=cuda MAX_CONTEXT=262144 KV_BYTES=2700000000 MAX_SEQS=2 MAX_BATCHED_TOKENS=2048
#   SPEC_METHOD=dspark SPEC_TOKENS=7   speculative decoding (the reference's tuned default: the
#                           checkpoint's DSpark module, 7 drafts per step; SPEC_TOKENS=0: off;
#                           ngram: prompt lookup, for a checkpoint without mtp.*)
#   EXTRA_ARGS              more dsv41-server flags, given to both ranks (word-split)
#   NCCL=0                  1: the CUDA forward's all-reduces and logits gather over NCCL
#                           (DSV41_TP_NCCL, both ranks; NCCL_SOCKET_IFNAME / NCCL_IB_HCA set to
#                           the detected fabric port; NEVER RUN ON TWO GPUS YET, docs/tp.md);
#                           needs BACKEND=cuda
#   CUDA_TUNABLES           library tunables of the CUDA backend for both ranks, as
#                           "DSV41_CUDA_NAME=VALUE ..." (docs/env_vars.md), e.g.
#                           "DSV41_CUDA_VISION=false DSV41_CUDA_MAX_CHUNK=1024"; every other
#                           DSV41_* variable is cleared from the ranks' environment
#   MEMGUARD_GIB=1          MemAvailable floor of the memory guard (MEMGUARD=0: no guard)
#   WAIT_S=2700             how long `start` waits for /health
#   SSH="ssh -o BatchMode=yes"   command used to reach the worker (tests use a local fake)
#   LINES=100               lines shown by `logs`
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-start}"
MODEL_DIR="${MODEL_DIR:-$HOME/models/DeepSeek-V4.1-Flash-Spark}"
WORKER_MODEL_DIR="${WORKER_MODEL_DIR:-$MODEL_DIR}"
STATE_DIR="${STATE_DIR:-$HOME/.dsv41-two-sparks}"
WORKER_STATE_DIR="${WORKER_STATE_DIR:-.dsv41-two-sparks}"
SERVER_BIN="${SERVER_BIN:-$root/build/server/dsv41-server}"
HOST="${HOST:-0.0.0.0}"
PORT="${PORT:-8000}"
TP_PORT="${TP_PORT:-29500}"
BACKEND="${BACKEND:-cuda}"
WAIT_S="${WAIT_S:-2700}"
read -r -a SSH_CMD <<<"${SSH:-ssh -o BatchMode=yes}"

SCRIPT_NAME=launch.sh
# shellcheck source=scripts/lib/deploy_common.sh
source "$root/scripts/lib/deploy_common.sh"
die() {
  echo "$SCRIPT_NAME: $*" >&2
  exit 1
}
info() { echo "launch.sh: $*"; }

# Local paths are used after a cd into STATE_DIR: make them absolute now.
SERVER_BIN="$(realpath -m -- "$SERVER_BIN")"
MODEL_DIR="$(realpath -m -- "$MODEL_DIR")"
STATE_DIR="$(realpath -m -- "$STATE_DIR")"
WORKER_MODEL_DIR="$(worker_path "$WORKER_MODEL_DIR" WORKER_MODEL_DIR)" || exit 1
WORKER_STATE_DIR="$(worker_path "$WORKER_STATE_DIR" WORKER_STATE_DIR)" || exit 1
MEMGUARD_GIB="${MEMGUARD_GIB:-1}"
[[ "$MEMGUARD_GIB" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "MEMGUARD_GIB='$MEMGUARD_GIB' is not a number of GiB"
read -r -a CUDA_ENV <<<"${CUDA_TUNABLES:-}"
for t in ${CUDA_ENV[@]+"${CUDA_ENV[@]}"}; do
  [[ "$t" =~ ^DSV41_CUDA_[A-Z0-9_]+=[^[:space:]]*$ ]] ||
    die "CUDA_TUNABLES: '$t' is not DSV41_CUDA_NAME=VALUE (docs/env_vars.md)"
done
case "${NCCL:-0}" in 0 | 1) ;; *) die "NCCL='${NCCL}' must be 0 or 1" ;; esac
[ "${NCCL:-0}" = 0 ] || [ "$BACKEND" = cuda ] ||
  die "NCCL=1 needs BACKEND=cuda (NCCL carries the CUDA forward's device buffers; BACKEND=$BACKEND)"

need_worker() {
  [ -n "${WORKER:-}" ] || die "set WORKER to the worker's SSH target on the fabric (e.g. WORKER=user@10.10.10.11)"
}
# Runs a bash script on the worker, sent on stdin (no second layer of quoting; whatever the
# worker user's login shell is). Paths inside are quoted by the caller with quote().
on_worker() { "${SSH_CMD[@]}" "$WORKER" bash -s <<<"$1"; }
quote() { printf '%q ' "$@"; }

# "HCA IFNAME IPV4" of the first ACTIVE RDMA port whose netdev has an IPv4 address; nothing when
# there is none. Also sent to the worker (declare -f), so it uses only rdma, ip and awk.
detect_fabric() {
  local dev hca
  rdma link show 2>/dev/null |
    awk '/state ACTIVE/ { h = $2; sub(/\/.*/, "", h); for (i = 1; i < NF; i++) if ($i == "netdev") print h, $(i + 1) }' |
    while read -r hca dev; do
      ip -4 -o addr show dev "$dev" 2>/dev/null | awk -v h="$hca" '{ split($4, a, "/"); print h, $2, a[1]; exit }'
    done | head -n 1
}
# IPv4 of one interface.
ifname_ip() {
  ip -4 -o addr show dev "$1" 2>/dev/null | awk '{ split($4, a, "/"); print a[1]; exit }'
}

# Sets HEAD_IP / WORKER_IP / HEAD_HCA / WORKER_HCA (and HEAD_IFNAME / WORKER_IFNAME when
# detected) from the overrides or the detection.
resolve_fabric() {
  local found
  if [ -z "${HEAD_IP:-}" ]; then
    if [ -n "${HEAD_IFNAME:-}" ]; then
      HEAD_IP="$(ifname_ip "$HEAD_IFNAME")"
      [ -n "$HEAD_IP" ] || die "HEAD_IFNAME=$HEAD_IFNAME has no IPv4 address (see: ip -br a)"
    else
      found="$(detect_fabric)"
      [ -n "$found" ] || die "no ACTIVE RDMA port with an IPv4 address on this node (see: rdma link; ip -br a); set HEAD_IP (or HEAD_IFNAME) to the head's fabric address"
      read -r HEAD_HCA HEAD_IFNAME HEAD_IP <<<"$found"
    fi
  fi
  if [ -z "${WORKER_IP:-}" ]; then
    if [ -n "${WORKER_IFNAME:-}" ]; then
      WORKER_IP="$(on_worker "$(declare -f ifname_ip); ifname_ip $(quote "$WORKER_IFNAME")")"
      [ -n "$WORKER_IP" ] || die "WORKER_IFNAME=$WORKER_IFNAME has no IPv4 address on $WORKER"
    else
      found="$(on_worker "$(declare -f detect_fabric); detect_fabric")"
      [ -n "$found" ] || die "no ACTIVE RDMA port with an IPv4 address on $WORKER (see: rdma link; ip -br a there); set WORKER_IP (or WORKER_IFNAME)"
      read -r WORKER_HCA WORKER_IFNAME WORKER_IP <<<"$found"
    fi
  fi
  [ "$HEAD_IP" != "$WORKER_IP" ] ||
    die "HEAD_IP and WORKER_IP are both $HEAD_IP: each node needs its own fabric address"
  HEAD_HCA="${HEAD_HCAS:-${HEAD_HCA:-}}"
  WORKER_HCA="${WORKER_HCAS:-${WORKER_HCA:-}}"
}

# Flags both ranks must share (the rendezvous refuses a mismatch, naming the setting).
engine_flags() {
  ENGINE=(--backend "$BACKEND" --max-context "${MAX_CONTEXT:-262144}"
    --kv-bytes "${KV_BYTES:-2700000000}" --max-sequences "${MAX_SEQS:-2}"
    --max-batched-tokens "${MAX_BATCHED_TOKENS:-2048}"
    --speculative-method "${SPEC_METHOD:-dspark}" --speculative-tokens "${SPEC_TOKENS:-7}")
  local extra=()
  read -r -a extra <<<"${EXTRA_ARGS:-}"
  ENGINE+=("${extra[@]}")
}

# pid from a pid file when it still runs dsv41-server (a recycled pid does not count).
local_server_pid() {
  local pid
  pid="$(cat "$1" 2>/dev/null || true)"
  [ -n "$pid" ] && grep -qa dsv41-server "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
  return 0
}
# Sets REMOTE_PID to the worker's process of pid file $1 when it still runs $2 ("" if none);
# returns 1 when the worker did not answer (unknown, not "gone").
remote_pid() {
  local out
  out="$(on_worker "pid=\$(cat $(quote "$WORKER_STATE_DIR/$1") 2>/dev/null)
    if [ -n \"\$pid\" ] && grep -qa $(quote "$2") /proc/\$pid/cmdline 2>/dev/null; then
      echo \"pid \$pid\"; else echo none; fi" 2>/dev/null)" || out=""
  REMOTE_PID=""
  case "$out" in
    "pid "*) REMOTE_PID=${out#pid } ;;
    none) ;;
    *) return 1 ;;
  esac
}

health_url() {
  local h="$HOST"
  [ "$h" = "0.0.0.0" ] && h=127.0.0.1
  echo "http://$h:$PORT/health"
}
# "000" when nothing answers.
health_code() {
  local c
  c="$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$(health_url)" 2>/dev/null)" || true
  echo "${c:-000}"
}

show_tail() {
  echo "---- last lines of $1 ----" >&2
  if [ "$1" = r0 ]; then tail -n 30 "$STATE_DIR/r0.log" >&2 || true
  else on_worker "tail -n 30 $(quote "$WORKER_STATE_DIR/r1.log")" >&2 || true; fi
  echo "----" >&2
}

cmd_stop() {
  need_worker
  local pid i g unreachable=0
  pid="$(local_server_pid "$STATE_DIR/r0.pid")"
  if [ -n "$pid" ]; then
    info "stopping rank 0 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 200; i++)); do
      [ -e "/proc/$pid" ] || break
      sleep 0.1
    done
    if [ -e "/proc/$pid" ]; then
      info "rank 0 still running after 20 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  g="$(cat "$STATE_DIR/memguard.pid" 2>/dev/null || true)"
  if [ -n "$g" ] && grep -qa memguard "/proc/$g/cmdline" 2>/dev/null; then
    kill -TERM "$g" 2>/dev/null || true
  fi
  rm -f "$STATE_DIR/r0.pid" "$STATE_DIR/memguard.pid"
  # Rank 0's stop tells the follower to exit; give it a moment before signalling it.
  for ((i = 0; i < 50; i++)); do
    if ! remote_pid r1.pid dsv41-server; then
      unreachable=1
      break
    fi
    [ -z "$REMOTE_PID" ] && break
    sleep 0.2
  done
  if [ "$unreachable" = 0 ] && [ -n "$REMOTE_PID" ]; then
    info "stopping rank 1 on $WORKER (pid $REMOTE_PID)"
    on_worker "kill -TERM $REMOTE_PID; for i in \$(seq 100); do [ -e /proc/$REMOTE_PID ] || exit 0; sleep 0.1; done; kill -KILL $REMOTE_PID" || true
  fi
  if [ "$unreachable" = 0 ] && remote_pid memguard.pid memguard; then
    if [ -n "$REMOTE_PID" ]; then on_worker "kill -TERM $REMOTE_PID" || true; fi
    on_worker "rm -f $(quote "$WORKER_STATE_DIR/r1.pid" "$WORKER_STATE_DIR/memguard.pid")" || true
  else
    unreachable=1
  fi
  if [ "$unreachable" = 1 ]; then
    echo "launch.sh: the worker $WORKER does not answer: rank 1 and its guard may still run there (run scripts/launch.sh stop again once it answers)" >&2
    return 1  # not exit: fail_start goes on to print why the start failed
  fi
  info "stopped"
}

cmd_status() {
  need_worker
  local r0 r1 code
  r0="$(local_server_pid "$STATE_DIR/r0.pid")"
  if remote_pid r1.pid dsv41-server; then
    r1=${REMOTE_PID:+running, pid $REMOTE_PID}
    r1=${r1:-not running}
  else
    r1="unknown (the worker does not answer over SSH)"
  fi
  if [ -n "$r0" ]; then echo "rank 0 (head): running, pid $r0"; else echo "rank 0 (head): not running"; fi
  echo "rank 1 ($WORKER): $r1"
  code="$(health_code)"
  echo "health $(health_url): $([ "$code" = 000 ] && echo "no answer" || echo "$code")"
  [ -n "$r0" ] && [[ "$r1" == running* ]] && [ "$code" = 200 ]
}

cmd_logs() {
  need_worker
  local n="${LINES:-100}"
  case "${1:-}" in
    r0) tail -n "$n" "$STATE_DIR/r0.log" ;;
    r1) on_worker "tail -n $(quote "$n") $(quote "$WORKER_STATE_DIR/r1.log")" ;;
    *) echo "usage: launch.sh logs r0|r1" >&2; exit 2 ;;
  esac
}

cmd_detect() {
  need_worker
  resolve_fabric
  echo "head:   ip $HEAD_IP${HEAD_HCA:+ hca $HEAD_HCA}"
  echo "worker: ip $WORKER_IP${WORKER_HCA:+ hca $WORKER_HCA}"
}

# Copies a file to the worker when its sha256 differs there (one SSH round trip when equal).
push_file() {
  local src=$1 dst=$2 sum
  sum="$(sha256sum "$src" | cut -d' ' -f1)"
  if [ "$(on_worker "sha256sum $(quote "$dst") 2>/dev/null | cut -d' ' -f1")" != "$sum" ]; then
    on_worker "mkdir -p $(quote "$(dirname "$dst")")"
    # The data goes on stdin, so this one is a plain command line for the login shell.
    "${SSH_CMD[@]}" "$WORKER" "cat > $(quote "$dst.new") && chmod +x $(quote "$dst.new") && mv $(quote "$dst.new" "$dst")" <"$src" ||
      die "could not copy $src to $WORKER:$dst"
  fi
}

# Stops what start launched and fails with the reason (and the log tail of `rank`, if given).
# cmd_stop's warnings (an unreachable worker whose rank 1 may still run) stay on stderr.
fail_start() {
  [ -n "${2:-}" ] && show_tail "$2"
  cmd_stop >/dev/null || true
  die "$1"
}

# The address other machines reach this host's HTTP at (HOST unless it is the wildcard): the
# source address of the default route, never the fabric address (the QSFP link reaches only the
# worker).
client_host() {
  if [ "$HOST" != 0.0.0.0 ]; then echo "$HOST"; return; fi
  ip -4 route get 1.1.1.1 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "src") { print $(i + 1); exit } }'
}

cmd_start() {
  need_worker
  [ -x "$SERVER_BIN" ] || die "no server binary at $SERVER_BIN (build it: cmake --build build --target dsv41-server, or set SERVER_BIN)"
  [ -f "$MODEL_DIR/config.json" ] || die "MODEL_DIR=$MODEL_DIR has no config.json (run scripts/download.sh, or set MODEL_DIR)"
  [ -z "$(local_server_pid "$STATE_DIR/r0.pid")" ] || die "rank 0 is already running (scripts/launch.sh status; scripts/launch.sh stop)"
  local code
  code="$(health_code)"
  [ "$code" = 000 ] || die "something already answers on $(health_url) (HTTP $code): stop it (e.g. the old serving container) or set PORT"
  on_worker true || die "cannot reach the worker with: ${SSH_CMD[*]} $WORKER (passwordless SSH head -> worker is needed)"
  # Relative worker paths are relative to the worker user's home (where on_worker starts).
  on_worker "test -f $(quote "$WORKER_MODEL_DIR/config.json")" ||
    die "the worker has no $WORKER_MODEL_DIR/config.json (scripts/copy-to-peer.sh, or set WORKER_MODEL_DIR)"
  remote_pid r1.pid dsv41-server || die "the worker $WORKER stopped answering over SSH"
  [ -z "$REMOTE_PID" ] || die "rank 1 is already running on $WORKER (scripts/launch.sh stop)"
  resolve_fabric
  engine_flags
  info "fabric: head $HEAD_IP, worker $WORKER_IP (TCP port $TP_PORT)"

  mkdir -p "$STATE_DIR"
  local key="$STATE_DIR/api_key"
  if [ ! -s "$key" ]; then
    (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$key" && echo >>"$key")
    info "created the API key $key"
  fi
  chmod 600 "$key"

  local wbin="$WORKER_STATE_DIR/bin/dsv41-server" wguard="$WORKER_STATE_DIR/bin/memguard.sh"
  push_file "$SERVER_BIN" "$wbin"
  push_file "$root/scripts/memguard.sh" "$wguard"
  local missing
  missing="$(on_worker "ldd $(quote "$wbin") 2>/dev/null | grep 'not found' || true")"
  [ -z "$missing" ] || die "dsv41-server lacks libraries on $WORKER (run scripts/setup.sh there): $missing"

  # Every DSV41_* setting reaches the ranks as a flag, the same on both: an inherited one (e.g.
  # DSV41_API_KEY exported for Pi, which the server prefers to --api-key-file) must not, and a
  # worker's own profile must not add any.
  local env_r0=() env_r1=() v
  for v in $(compgen -e); do
    case "$v" in DSV41_*) env_r0+=(-u "$v") ;; esac
  done
  # CUDA library tunables are not server flags: they travel as environment, the same to both
  # (checked at the top).
  env_r0+=(${CUDA_ENV[@]+"${CUDA_ENV[@]}"})
  env_r1+=(${CUDA_ENV[@]+"${CUDA_ENV[@]}"})
  if [ "${RDMA:-0}" = 1 ]; then
    if [ -z "$HEAD_HCA" ] || [ -z "$WORKER_HCA" ]; then
      die "RDMA=1 needs the RDMA devices: set HEAD_HCAS and WORKER_HCAS (see: rdma link)"
    fi
    env_r0+=(DSV41_TP_IB_DEVICE="$HEAD_HCA")
    env_r1+=(DSV41_TP_IB_DEVICE="$WORKER_HCA")
  fi
  if [ "${NCCL:-0}" = 1 ]; then
    env_r0+=(DSV41_TP_NCCL=1)
    env_r1+=(DSV41_TP_NCCL=1)
    # NCCL's bootstrap and its IB/RoCE transport on the fabric port, not the first interface.
    [ -z "${HEAD_IFNAME:-}" ] || env_r0+=(NCCL_SOCKET_IFNAME="$HEAD_IFNAME")
    [ -z "${WORKER_IFNAME:-}" ] || env_r1+=(NCCL_SOCKET_IFNAME="$WORKER_IFNAME")
    [ -z "$HEAD_HCA" ] || env_r0+=(NCCL_IB_HCA="$HEAD_HCA")
    [ -z "$WORKER_HCA" ] || env_r1+=(NCCL_IB_HCA="$WORKER_HCA")
  fi
  # Rank 1 first: it retries the connection to rank 0 for --tp-connect-timeout-ms (60 s). sh -c
  # writes its own pid before exec'ing, so the pid file names the server whether or not setsid
  # had to fork.
  info "starting rank 1 on $WORKER"
  on_worker "model=$(quote "$WORKER_MODEL_DIR")
    case \"\$model\" in /*) ;; *) model=\"\$HOME/\$model\" ;; esac
    mkdir -p $(quote "$WORKER_STATE_DIR") && cd $(quote "$WORKER_STATE_DIR") || exit 1
    for v in \$(compgen -e); do case \"\$v\" in DSV41_*) unset \"\$v\" ;; esac; done
    rm -f r1.pid
    nohup setsid sh -c 'echo \$\$ >r1.pid; exec \"\$@\"' sh env ${env_r1[*]+$(quote "${env_r1[@]}")} \
      ./bin/dsv41-server --model \"\$model\" --rank 1 \
      --peer $(quote "$HEAD_IP:$TP_PORT") --tp-bind $(quote "$WORKER_IP") $(quote "${ENGINE[@]}") \
      >r1.log 2>&1 </dev/null &
    for i in \$(seq 100); do [ -s r1.pid ] && break; sleep 0.05; done" ||
    die "the worker $WORKER did not answer over SSH when rank 1 was started (check it with: scripts/launch.sh status)"
  info "starting rank 0 here (HTTP $HOST:$PORT)"
  rm -f "$STATE_DIR/r0.pid"
  # A bare background command (not `cd && cmd &`, whose waiting subshell would keep this
  # script's stdout open for the server's lifetime).
  (cd "$STATE_DIR" || exit 1
  nohup setsid sh -c 'echo $$ >r0.pid; exec "$@"' sh \
    env ${env_r0[@]+"${env_r0[@]}"} "$SERVER_BIN" --model "$MODEL_DIR" --rank 0 \
    --peer "$WORKER_IP" --tp-bind "$HEAD_IP" --tp-port "$TP_PORT" --host "$HOST" --port "$PORT" \
    --api-key-file "$key" "${ENGINE[@]}" >r0.log 2>&1 </dev/null &)
  local i
  for ((i = 0; i < 100; i++)); do
    [ -s "$STATE_DIR/r0.pid" ] && break
    sleep 0.05
  done

  if [ "${MEMGUARD:-1}" != 0 ]; then
    (cd "$STATE_DIR" || exit 1
    MEMGUARD_GIB="$MEMGUARD_GIB" MEMGUARD_LOG="$STATE_DIR/memguard.log" nohup setsid \
      sh -c 'echo $$ >memguard.pid; exec "$@"' sh "$root/scripts/memguard.sh" r0.pid \
      >/dev/null 2>&1 </dev/null &)
    on_worker "cd $(quote "$WORKER_STATE_DIR") || exit 1
      MEMGUARD_GIB=$(quote "$MEMGUARD_GIB") MEMGUARD_LOG=memguard.log nohup setsid \
        sh -c 'echo \$\$ >memguard.pid; exec \"\$@\"' sh bin/memguard.sh r1.pid \
        >/dev/null 2>&1 </dev/null &" ||
      fail_start "the worker $WORKER did not answer over SSH when its memory guard was started"
    # A guard that is not running is no guard: check both before waiting. A guard ends with the
    # rank it watches, so a rank that already exited (a refused rendezvous takes well under the
    # second below) is reported as itself, not as its guard.
    sleep 1
    local g
    g="$(cat "$STATE_DIR/memguard.pid" 2>/dev/null || true)"
    if [ -z "$g" ] || ! grep -qa memguard "/proc/$g/cmdline" 2>/dev/null; then
      [ -n "$(local_server_pid "$STATE_DIR/r0.pid")" ] ||
        fail_start "rank 0 exited during start-up (log: $STATE_DIR/r0.log)" r0
      fail_start "the memory guard did not start here (see $STATE_DIR/memguard.log)"
    fi
    if ! remote_pid memguard.pid memguard || [ -z "$REMOTE_PID" ]; then
      if remote_pid r1.pid dsv41-server && [ -z "$REMOTE_PID" ]; then
        fail_start "rank 1 exited during start-up (log on $WORKER: $WORKER_STATE_DIR/r1.log)" r1
      fi
      fail_start "the memory guard did not start on $WORKER (see $WORKER_STATE_DIR/memguard.log there)"
    fi
  fi

  info "waiting up to $WAIT_S s for $(health_url) (logs: scripts/launch.sh logs r0|r1)"
  local t0=$SECONDS last_r1=$SECONDS silent=0
  while :; do
    # Rank 0 alive first, so a 200 is from it (not from whatever held the port).
    [ -n "$(local_server_pid "$STATE_DIR/r0.pid")" ] ||
      fail_start "rank 0 exited during start-up (log: $STATE_DIR/r0.log)" r0
    [ "$(health_code)" = 200 ] && [ -n "$(local_server_pid "$STATE_DIR/r0.pid")" ] && break
    if ((SECONDS - last_r1 >= 5)); then  # one SSH round trip every 5 s
      last_r1=$SECONDS
      if remote_pid r1.pid dsv41-server; then
        silent=0
        [ -n "$REMOTE_PID" ] ||
          fail_start "rank 1 exited during start-up (log on $WORKER: $WORKER_STATE_DIR/r1.log)" r1
      else
        silent=$((silent + 1))  # a lost SSH round trip is not a dead rank
        ((silent < 6)) || fail_start "the worker $WORKER has not answered over SSH for 30 s"
      fi
    fi
    if ((SECONDS - t0 > WAIT_S)); then
      show_tail r0
      die "no healthy API after $WAIT_S s; both ranks are still running (scripts/launch.sh logs r0|r1; scripts/launch.sh stop)"
    fi
    sleep 1
  done
  local there
  there="$(client_host)"
  info "ready after $((SECONDS - t0)) s: http://127.0.0.1:$PORT/v1 here${there:+, http://$there:$PORT/v1 from other machines}; model deepseek-v4.1-flash; key file $key"
  info "Pi: pi/install.sh http://${there:-<head-address>}:$PORT/v1; export DSV41_API_KEY=\"\$(cat '$key')\""
}

case "$cmd" in
  start) cmd_start ;;
  stop) cmd_stop || exit 1 ;;
  status) cmd_status ;;
  logs) cmd_logs "${2:-}" ;;
  detect) cmd_detect ;;
  -h | --help | help) print_header ;;
  *) echo "usage: launch.sh [start|status|logs r0|r1|stop|detect]" >&2; exit 2 ;;
esac
