#!/usr/bin/env bash
# Builds Kiln's libFuzzer targets (fuzz/*Fuzzer.cpp, by fuzz/fuzz.mk: clang's
# -fsanitize=fuzzer,address,undefined over the Kiln sources they exercise),
# then runs each for FUZZ_SECONDS (default 60) from its seed corpus in
# fuzz/corpus/<name>/ (new inputs go to a scratch copy, not the repository).
# FUZZ_TARGETS picks some (default: all). Prints each target's executions and
# coverage; exits non-zero on a crash, leaving the reproducer in
# build-fuzz/<name>/.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${FUZZ_CXX:-$(command -v clang++-22 || command -v clang++)}
if command -v ccache >/dev/null; then CXX="ccache $CXX"; fi
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=(${FUZZ_TARGETS:-safetensors config tokens tokenizer mlir manifest target kernelcall})
OUT=build-fuzz
# Longest input each target is given. MLIR's parser recurses once per nesting
# level, so a long enough input of brackets overflows any stack: an upstream
# limit, not Kiln's (kiln-opt parses on a 1 GiB stack, test/Dialect/Kiln/deep-nesting.test).
declare -A MAX_LEN=([mlir]=4096)

# One compile at a time: the builds share the machine with whatever else runs.
echo "== building ${TARGETS[*]} with $CXX"
fuzzers=()
for name in "${TARGETS[@]}"; do fuzzers+=("$OUT/$name-fuzzer"); done
make -s -f fuzz/fuzz.mk -j1 CXX="$CXX" "${fuzzers[@]}"
status=0
for name in "${TARGETS[@]}"; do
  rm -rf "$OUT/$name" && mkdir -p "$OUT/$name/corpus" && cp fuzz/corpus/"$name"/* "$OUT/$name/corpus/"
  echo "== $name: fuzzing for ${SECONDS_EACH}s"
  # A target's words that libFuzzer cannot learn (fuzz/<name>.dict), if any.
  dict=()
  if [[ -f fuzz/$name.dict ]]; then dict=(-dict="../../fuzz/$name.dict"); fi
  # The whole log stays in build-fuzz/<name>/fuzz.log; shown: the final
  # coverage (cov: edges, ft: features) and executions, or how it failed.
  # Manual poisoning off, as `make asan` has it: LLVM's BumpPtrAllocator
  # poisons a slab our instrumented code started, the uninstrumented libMLIR
  # then hands out parts of it without unpoisoning (a use-after-poison that is
  # no bug, docs/validation.md; CI's mlir fuzzer hit it).
  if (cd "$OUT/$name" && ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0 "../$name-fuzzer" -max_total_time="$SECONDS_EACH" \
        -max_len="${MAX_LEN[$name]:-65536}" -print_final_stats=1 "${dict[@]}" corpus >fuzz.log 2>&1); then
    grep -E "^#[0-9]+[[:space:]]+DONE|stat::(number_of_executed_units|average_exec_per_sec|new_units_added)" \
      "$OUT/$name/fuzz.log"
  else
    tail -n 40 "$OUT/$name/fuzz.log"
    status=1
  fi
  if ls "$OUT/$name"/crash-* "$OUT/$name"/leak-* "$OUT/$name"/timeout-* >/dev/null 2>&1; then
    echo "== $name: FAILED, reproducer(s) in $OUT/$name/"
    status=1
  fi
done
exit $status
