#!/usr/bin/env bash
# Builds Kiln's libFuzzer targets (fuzz/*Fuzzer.cpp) with clang's
# -fsanitize=fuzzer,address,undefined over the reader sources they exercise,
# then runs each for FUZZ_SECONDS (default 60) from its seed corpus in
# fuzz/corpus/<name>/ (new inputs go to a scratch copy, not the repository).
# Prints each target's executions and coverage; exits non-zero on a crash,
# leaving the reproducer in build-fuzz/<name>/.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${FUZZ_CXX:-$(command -v clang++-22 || command -v clang++)}
SECONDS_EACH=${FUZZ_SECONDS:-60}
OUT=build-fuzz
mkdir -p "$OUT"
FLAGS=(-std=gnu++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Wno-deprecated-declarations
       -Iinclude -DNDEBUG)
SUPPORT=(lib/Support/Json.cpp)
RUNTIME=(lib/Runtime/Tensor.cpp lib/Runtime/SafeTensors.cpp lib/Runtime/TokenBatch.cpp)
declare -A SOURCES=(
  [safetensors]="fuzz/SafeTensorsFuzzer.cpp ${RUNTIME[*]} ${SUPPORT[*]}"
  [config]="fuzz/ConfigFuzzer.cpp lib/Driver/TrainConfig.cpp lib/Frontend/Qwen3Config.cpp ${SUPPORT[*]}"
  [tokens]="fuzz/TokensFuzzer.cpp ${RUNTIME[*]} ${SUPPORT[*]}"
)
status=0
for name in safetensors config tokens; do
  echo "== $name: building with $CXX"
  # shellcheck disable=SC2086
  "$CXX" "${FLAGS[@]}" ${SOURCES[$name]} -lfmt -o "$OUT/$name-fuzzer"
  rm -rf "$OUT/$name" && mkdir -p "$OUT/$name/corpus" && cp fuzz/corpus/"$name"/* "$OUT/$name/corpus/"
  echo "== $name: fuzzing for ${SECONDS_EACH}s"
  if ! (cd "$OUT/$name" && ASAN_OPTIONS=detect_leaks=0 "../$name-fuzzer" -max_total_time="$SECONDS_EACH" \
          -max_len=65536 -print_final_stats=1 corpus 2>&1 | tail -n 20 | grep -E "Done|DONE|stat::|ERROR|SUMMARY|crash-|cov:" | tail -n 8); then
    status=1
  fi
  if ls "$OUT/$name"/crash-* "$OUT/$name"/leak-* "$OUT/$name"/timeout-* >/dev/null 2>&1; then
    echo "== $name: FAILED, reproducer(s) in $OUT/$name/"
    status=1
  fi
done
exit $status
