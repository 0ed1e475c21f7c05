#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages (and the pinned npm test clients).
# Idempotent: re-running only installs what is missing. Needs root (or sudo) for apt.
set -euo pipefail
pkgs=(build-essential clang cmake ninja-build pkg-config git
      libsimdjson-dev libfmt-dev catch2 libboost-dev libpcre2-dev libutf8proc-dev libibverbs-dev
      libpng-dev libjpeg-dev libgif-dev libwebp-dev python3-pil python3-numpy
      python3 iproute2 curl rsync)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Pinned Node test clients (tests/server/node/package-lock.json) for the server:node tests.
node_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/server/node"
if command -v npm >/dev/null 2>&1; then
  if [ ! -d "$node_dir/node_modules" ] || [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules" ]; then
    (cd "$node_dir" && npm ci --no-audit --no-fund --ignore-scripts && touch node_modules)
  fi
else
  echo "setup.sh: npm not found; the real-client tests (server:node, server:pi) are skipped until Node >= 20.6 and npm are installed" >&2
fi
if command -v node >/dev/null 2>&1; then
  v="$(node --version 2>/dev/null || true)"
  case "$v" in
    v2[1-9]* | v[3-9][0-9]* | v20.[6-9]* | v20.[1-9][0-9]*) ;;
    *) echo "setup.sh: node $v is older than 20.6: the real-client tests (server:node, server:pi) are skipped (Debian 12's nodejs is 18; install Node 20, e.g. from nodesource)" >&2 ;;
  esac
fi
