//===- MlirFuzzer.cpp - libFuzzer target: parsing and verifying Kiln IR ----===//
//
// Any bytes as a module of kiln, func and shard ops with every kernel
// registered, as kiln-opt reads it: parsed and verified (kiln's attributes,
// shape rules, kernel verifiers), or refused with diagnostics. A module that
// verifies must print, and what it prints must parse and verify again (the
// custom assembly formats round-trip).
//
// Only Kiln's code is instrumented; libMLIR's parser is not, so coverage
// counts Kiln's verifiers, parsers and printers. Inputs are capped at 4 KiB
// (scripts/fuzz.sh) because the upstream parser recurses per nesting level.

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/CustomKernels/Registry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

/// One context for every input, created on first use (after the kernels
/// register, so kiln.kernel ops verify against them).
mlir::MLIRContext &context() {
  static mlir::MLIRContext *ctx = [] {
    kiln::registerCustomKernels();
    mlir::DialectRegistry registry;
    registry.insert<kiln::KilnDialect, mlir::func::FuncDialect, mlir::shard::ShardDialect>();
    auto *c = new mlir::MLIRContext(registry, mlir::MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    return c;
  }();
  return *ctx;
}

mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &ctx, llvm::StringRef text) {
  mlir::ParserConfig config(&ctx); // verifies after parsing
  return mlir::parseSourceString<mlir::ModuleOp>(text, config);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &ctx = context();
  // Errors are the expected outcome of most inputs; the last one is kept
  // only to explain a failed round trip.
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler swallow(&ctx, [&](mlir::Diagnostic &diag) {
    diagnostics = diag.str();
    return mlir::success();
  });
  // MLIR's lexer stops at the NUL that ends every file's buffer; a
  // std::string has one, the fuzzer's bytes do not.
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(ctx, text);
  if (!module)
    return 0;
  std::string printed;
  llvm::raw_string_ostream os(printed);
  module->print(os);
  diagnostics.clear();
  if (!parse(ctx, printed)) {
    std::fprintf(stderr, "mlir fuzzer: the printed module does not parse again: %s\n%s\n",
                 diagnostics.c_str(), printed.c_str());
    std::abort();
  }
  return 0;
}
