#!/usr/bin/env bash
# Copies the Debian headers, libraries, CMake and pkg-config files that scripts/gpu-test.sh needs
# into .gpu-deps/usr (ignored by git), for machines without apt such as the lent GPU machine:
# carry the folder there (the device tool's `carry: [".gpu-deps"]`: it is ignored, so it does not
# travel otherwise) and run `DEPS_PREFIX=.gpu-deps/usr scripts/gpu-test.sh` (docs/kernels.md).
# Needs the packages of scripts/setup.sh installed here; ~14 MB.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.gpu-deps"
packages=(libfmt-dev libfmt9 libsimdjson-dev libsimdjson14 libpcre2-dev libpcre2-8-0 libpcre2-16-0
          libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2 catch2
          libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo zlib1g-dev zlib1g
          libgif-dev libgif7 libwebp-dev libwebp7 libwebpdemux2 libwebpmux3)
rm -rf "$dest"
mkdir -p "$dest"
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || { echo "pack-gpu-deps.sh: package $p is not installed" >&2; exit 1; }
  while IFS= read -r f; do
    case "$f" in
      /usr/include/* | /usr/lib/* | /usr/share/pkgconfig/* | /usr/share/cmake/* ) ;;
      *) continue ;;
    esac
    if [ -f "$f" ] || [ -L "$f" ]; then
      mkdir -p "$dest$(dirname "$f")"
      cp -P "$f" "$dest$f"
    fi
  done < <(dpkg -L "$p")
done
du -sh "$dest"
