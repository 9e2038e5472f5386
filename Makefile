# Kiln: the two commands a newcomer needs.
#   make run   installs what is missing, builds, runs the main job on the
#              embedded default (capture + evaluate the tiny Qwen3 fixture)
#   make test  the same set-up, then every test (lit + GoogleTest via ctest)

BUILD ?= build
JOBS ?= $(shell nproc)
export CCACHE_DIR ?= $(HOME)/.cache/kiln-ccache
KILN = $(BUILD)/tools/kiln/kiln
FIXTURE = test/data/qwen3-dense-tiny

.PHONY: all deps configure build run test docs clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@echo "== kiln capture: Qwen3 fixture (3 layers, hidden 64, vocab 512) as kiln IR =="
	$(KILN) capture --model $(FIXTURE) --batch 2 --seq 32 --summary
	@echo "== kiln eval: eager CPU loss of the fixture batch (Transformers: 6.254671) =="
	$(KILN) eval --model $(FIXTURE) --tokens $(FIXTURE)/tokens.json

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Regenerates the dialect reference from ODS.
docs: configure
	/usr/lib/llvm-22/bin/mlir-tblgen -gen-dialect-doc -dialect=kiln \
	  -I include -I /usr/lib/llvm-22/include \
	  include/kiln/Dialect/Kiln/IR/KilnOps.td -o docs/dialect.md

clean:
	rm -rf $(BUILD)
