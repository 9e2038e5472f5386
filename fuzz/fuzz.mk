# Builds Kiln's libFuzzer targets into build-fuzz/<name>-fuzzer; scripts/fuzz.sh
# runs them. Kiln's sources are compiled one object each (with -MMD, so a
# rerun rebuilds only what changed), instrumented for coverage and sanitized;
# the libraries they link (libMLIR, ICU, PCRE2, OpenBLAS) are not.
#
#   make -f fuzz/fuzz.mk CXX=clang++-22 [build-fuzz/<name>-fuzzer]

LLVM := /usr/lib/llvm-22
TBLGEN := $(LLVM)/bin/mlir-tblgen
OUT := build-fuzz
GEN := $(OUT)/gen

# OpenBLAS's OpenMP build, as CMakeLists.txt links it.
OPENBLAS := $(shell dpkg-architecture -qDEB_HOST_MULTIARCH)/openblas-openmp

SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined
# LLVM's definitions (llvm-config --cxxflags, less -fno-exceptions: Kiln
# throws kiln::Error) for the sources that include MLIR; harmless elsewhere.
CXXFLAGS := -std=gnu++17 -O1 -g -fsanitize=fuzzer-no-link $(SANITIZE) -DNDEBUG \
  -Wno-deprecated-declarations -Wno-c++20-extensions -Iinclude -I$(GEN) -isystem $(LLVM)/include \
  -isystem /usr/include/$(OPENBLAS) \
  -D_GNU_SOURCE -D__STDC_CONSTANT_MACROS -D__STDC_FORMAT_MACROS -D__STDC_LIMIT_MACROS \
  -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 \
  -MMD -MP
LDFLAGS := -fsanitize=fuzzer $(SANITIZE)

SUPPORT := lib/Support/Json.cpp
RUNTIME_IO := lib/Runtime/Tensor.cpp lib/Runtime/SafeTensors.cpp lib/Runtime/FusedExperts.cpp \
  lib/Runtime/TokenBatch.cpp
# The dialect with every registered kernel (KernelSpec verifiers). The kernels'
# CPU implementations pull in the runtime's kernels, never called here.
DIALECT := $(wildcard lib/Dialect/Kiln/IR/*.cpp)
KERNELS := $(wildcard lib/CustomKernels/*.cpp)
RUNTIME_KERNELS := lib/Runtime/ForwardKernels.cpp lib/Runtime/BackwardKernels.cpp \
  lib/Runtime/FlashAttention.cpp lib/Runtime/ChunkedCrossEntropy.cpp lib/Runtime/MoeKernels.cpp \
  lib/Runtime/BlockwiseMoe.cpp \
  lib/Runtime/ThreadBudget.cpp

SOURCES_safetensors := fuzz/SafeTensorsFuzzer.cpp $(RUNTIME_IO) $(SUPPORT)
SOURCES_config := fuzz/ConfigFuzzer.cpp lib/Driver/TrainConfig.cpp lib/Frontend/Qwen3Config.cpp \
  lib/Frontend/HfConfigFields.cpp \
  lib/Config/ConfigDocument.cpp lib/Config/OverrideRules.cpp lib/Config/SelectiveAcOption.cpp \
  $(SUPPORT)
SOURCES_tokens := fuzz/TokensFuzzer.cpp $(RUNTIME_IO) $(SUPPORT)
SOURCES_tokenizer := fuzz/TokenizerFuzzer.cpp lib/Data/Tokenizer.cpp $(SUPPORT)
# The manifest check with the generated HloModuleProto classes.
SOURCES_manifest := fuzz/ManifestFuzzer.cpp lib/Driver/NeuronManifest.cpp $(SUPPORT) \
  $(GEN)/proto/hlo.pb.cc
SOURCES_target := fuzz/TargetProfileFuzzer.cpp lib/Planner/TargetProfile.cpp $(SUPPORT)
SOURCES_mlir := fuzz/MlirFuzzer.cpp $(DIALECT) $(KERNELS) lib/Runtime/Tensor.cpp \
  $(RUNTIME_KERNELS) $(SUPPORT)
# A custom call's backend_config as Kiln's evaluator reads it (its NKI binding).
SOURCES_kernelcall := fuzz/KernelCallFuzzer.cpp lib/Driver/HloKernelCall.cpp $(DIALECT) $(KERNELS) \
  lib/Runtime/Tensor.cpp $(RUNTIME_KERNELS) $(SUPPORT)

LIBS_config := -ltomlplusplus
LIBS_manifest := -lprotobuf
LIBS_tokenizer := -lpcre2-8 $(shell pkg-config --libs icu-i18n icu-uc)
LIBS_mlir := -L$(LLVM)/lib -Wl,-rpath,$(LLVM)/lib -lMLIR -lLLVM-22 \
  -L/usr/lib/$(OPENBLAS) -Wl,-rpath,/usr/lib/$(OPENBLAS) -lopenblas
LIBS_kernelcall := $(LIBS_mlir)

TARGETS := safetensors config tokens tokenizer mlir manifest target kernelcall
objects = $(patsubst %.cc,$(OUT)/obj/%.o,$(patsubst %.cpp,$(OUT)/obj/%.o,$(SOURCES_$(1))))

.PHONY: all
all: $(TARGETS:%=$(OUT)/%-fuzzer)
# Objects are reached through pattern rules only; keep them for the next build.
.SECONDARY:

.SECONDEXPANSION:
$(OUT)/%-fuzzer: $$(call objects,$$*)
	$(CXX) $(LDFLAGS) $^ -lfmt $(LIBS_$*) -o $@

$(OUT)/obj/%.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c $< -o $@

# proto/hlo.proto's C++ classes, as proto/CMakeLists.txt generates them; not
# instrumented beyond the rest (the fuzzer exercises Kiln's checks, not protobuf).
$(GEN)/proto/hlo.pb.cc $(GEN)/proto/hlo.pb.h: proto/hlo.proto
	@mkdir -p $(GEN)
	protoc --cpp_out=$(GEN) $<
$(OUT)/obj/$(GEN)/proto/hlo.pb.o: $(GEN)/proto/hlo.pb.cc
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c $< -o $@
$(OUT)/obj/fuzz/ManifestFuzzer.o $(OUT)/obj/lib/Driver/NeuronManifest.o: | $(GEN)/proto/hlo.pb.h

# The dialect's ODS, generated as include/kiln/Dialect/Kiln/IR/CMakeLists.txt
# does; the first build of an object that includes them waits for all.
ODS := include/kiln/Dialect/Kiln/IR
INC := $(GEN)/kiln/Dialect/Kiln/IR
TBLGEN_INC := $(addprefix $(INC)/,KilnInterfaces.h.inc KilnInterfaces.cpp.inc KilnEnums.h.inc \
  KilnEnums.cpp.inc KilnAttrs.h.inc KilnAttrs.cpp.inc KilnDialect.h.inc KilnDialect.cpp.inc \
  KilnOps.h.inc KilnOps.cpp.inc)
$(patsubst %.cpp,$(OUT)/obj/%.o,fuzz/MlirFuzzer.cpp $(DIALECT) $(KERNELS)): | $(TBLGEN_INC)

# TD: the .td file, then the generator's options.
$(INC)/KilnInterfaces.h.inc: TD := KilnInterfaces.td -gen-op-interface-decls
$(INC)/KilnInterfaces.cpp.inc: TD := KilnInterfaces.td -gen-op-interface-defs
$(INC)/KilnEnums.h.inc: TD := KilnAttrs.td -gen-enum-decls
$(INC)/KilnEnums.cpp.inc: TD := KilnAttrs.td -gen-enum-defs
$(INC)/KilnAttrs.h.inc: TD := KilnAttrs.td -gen-attrdef-decls -attrdefs-dialect=kiln
$(INC)/KilnAttrs.cpp.inc: TD := KilnAttrs.td -gen-attrdef-defs -attrdefs-dialect=kiln
$(INC)/KilnDialect.h.inc: TD := KilnOps.td -gen-dialect-decls -dialect=kiln
$(INC)/KilnDialect.cpp.inc: TD := KilnOps.td -gen-dialect-defs -dialect=kiln
$(INC)/KilnOps.h.inc: TD := KilnOps.td -gen-op-decls
$(INC)/KilnOps.cpp.inc: TD := KilnOps.td -gen-op-defs
$(TBLGEN_INC): $(wildcard $(ODS)/*.td)
	@mkdir -p $(@D)
	$(TBLGEN) -I $(ODS) -I include -I $(LLVM)/include $(ODS)/$(TD) -o $@

-include $(shell find $(OUT)/obj -name '*.d' 2>/dev/null)

# Text inputs are encoded with this tokenizer (also a seed of its own).
$(OUT)/obj/fuzz/TokenizerFuzzer.o: CXXFLAGS += \
  -DKILN_FUZZ_TOKENIZER='"$(CURDIR)/fuzz/corpus/tokenizer/tiny-tokenizer.json"'
