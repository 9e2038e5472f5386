#!/usr/bin/env bash
# make test's runner: every test under ctest (lit files, GoogleTest units, MPI
# tests; test/CMakeLists.txt), then the run's wall time and its five slowest
# tests, so that a slow addition shows where it lands. Exits with ctest's
# status. Usage: scripts/run-tests.sh BUILD_DIR JOBS [ctest arguments...]
set -uo pipefail
build=${1:-build}
jobs=${2:-$(nproc)}
shift 2 || shift $#
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@" | tee "$log"
status=${PIPESTATUS[0]}
end=$(date +%s.%N)
# "  12/370 Test  #45: lit/CLI/train.test ......   Passed   12.34 sec"
times=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9]+\.[0-9]+) sec$/\2 \1/p' "$log")
echo
awk -v build="$build" -v start="$start" -v end="$end" -v jobs="$jobs" \
  '{ sum += $1; n += 1 } END { wall = end - start; printf "ctest in %s: %d tests in %.0f s wall (%.1f min) on %d jobs, %.0f s of test time\n", build, n, wall, wall / 60, jobs, sum }' \
  <<<"$times"
echo "the five slowest:"
sort -g -r <<<"$times" | head -n 5 | awk '{ printf "  %8.1f s  %s\n", $1, $2 }'
exit "$status"
