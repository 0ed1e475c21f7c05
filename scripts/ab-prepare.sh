#!/usr/bin/env bash
# Prepares a same-machine A/B of the working tree against a git ref for scripts/gpu-ab.sh: the lent
# GPU machine gets a copy of the working tree (no history), so the baseline travels as files.
#   .ab/base/PATH   BASE's version of every file that differs from it (tests/ and docs/ left out:
#                   only what the benchmark binary is built from matters)
#   .ab/tree/PATH   the working tree's version of the same files
#   .ab/removed     paths the tree has and BASE has not (deleted for the base build, restored after)
# .ab/ is untracked and not ignored, so it travels with the tree; delete it when done (it also
# shows up in `duplicates --change`).
# Usage: scripts/ab-prepare.sh BASE_REF        e.g. scripts/ab-prepare.sh main
set -euo pipefail
base="${1:?usage: scripts/ab-prepare.sh BASE_REF}"
root="$(git rev-parse --show-toplevel)"
cd "$root"
git rev-parse --verify --quiet "$base^{commit}" >/dev/null ||
  { echo "ab-prepare.sh: '$base' is not a commit" >&2; exit 1; }
rm -rf .ab/base .ab/tree .ab/removed
mkdir -p .ab/base .ab/tree
: >.ab/removed
n=0
while IFS= read -r f; do
  if git cat-file -e "$base:$f" 2>/dev/null; then
    mkdir -p ".ab/base/$(dirname "$f")"
    git show "$base:$f" >".ab/base/$f"
    n=$((n + 1))
  fi
  if [ -e "$f" ]; then
    mkdir -p ".ab/tree/$(dirname "$f")"
    cp "$f" ".ab/tree/$f"
    git cat-file -e "$base:$f" 2>/dev/null || echo "$f" >>.ab/removed
  fi
done < <(git diff --name-only "$base" -- . ':!tests' ':!docs'; git ls-files --others --exclude-standard -- . ':!tests' ':!docs' ':!.ab')
echo "ab-prepare.sh: $n files as in $base under .ab/base, $(wc -l <.ab/removed) only in the tree"
