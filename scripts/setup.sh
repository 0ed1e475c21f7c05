#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages (and the pinned npm test clients).
# Idempotent: re-running only installs what is missing. Needs root (or sudo) for apt.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git
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
  echo "setup.sh: npm not found; the server:node tests will fail until Node/npm are installed" >&2
fi
