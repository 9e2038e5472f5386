//===- HostCalls.h - How compiled code calls a custom call's kernel -*- C++ -*-===//
//
// kiln-convert-hlo-to-linalg turns each hlo.custom_call into a call of one
// external function, `kiln_custom_call(i64 site, memref<?xi64> pointers)`
// (C interface: `_mlir_ciface_kiln_custom_call(int64_t, StridedMemRefType<
// int64_t, 1> *)`), the pointers those of the operand buffers and then of
// the result buffers the host must write, each dense and row-major. The
// host binds each site to a kernel from the hlo module before lowering:
// numberCustomCallSites gives both sides the same numbering.
//
// The collectives and the replica id go the same way through
// `kiln_collective(i64 site, memref<?xi64> pointers)`: the operand's buffer
// (none for the replica id), then the result's; the host binds each site
// (numberCollectiveSites) to its kind, dimension, reduction and group, and
// runs it over MPI among the group's ranks.
//
// A large parallel loop nest runs across the host's threads
// (kiln-outline-loops): `kiln_parallel_for(i64 site, i64 lower, i64 upper,
// memref<?xi64> words)` runs the nest's function, the site-th symbol of
// the module's kiln.parallel_loops (kParallelLoopsAttr), on shares of [lower, upper) of its
// outermost dimension, through the JIT's packed wrapper `_mlir_<name>(void
// **)`: a pointer to each word (the arguments' LLVM values: a memref's
// descriptor, a scalar's bits), then to the share's two bounds.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_HLOTOLINALG_HOSTCALLS_H
#define KILN_PASSES_HLOTOLINALG_HOSTCALLS_H

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/SmallVector.h"

namespace kiln {

/// The external functions, and the attribute holding each custom call's site.
inline constexpr llvm::StringLiteral kCustomCallFunction = "kiln_custom_call";
inline constexpr llvm::StringLiteral kSgemmFunction = "kiln_sgemm";
inline constexpr llvm::StringLiteral kCallSiteAttr = "kiln_call_site";
inline constexpr llvm::StringLiteral kCollectiveFunction = "kiln_collective";
inline constexpr llvm::StringLiteral kCollectiveSiteAttr = "kiln_collective_site";
inline constexpr llvm::StringLiteral kParallelForFunction = "kiln_parallel_for";

/// Numbers the hlo.custom_call ops of `module` in walk order (kCallSiteAttr)
/// and returns them in that order.
llvm::SmallVector<mlir::Operation *> numberCustomCallSites(mlir::ModuleOp module);
/// Numbers the collectives (all-gather, reduce-scatter, all-reduce,
/// all-to-all) and replica ids of `module` in walk order
/// (kCollectiveSiteAttr) and returns them in that order.
llvm::SmallVector<mlir::Operation *> numberCollectiveSites(mlir::ModuleOp module);

} // namespace kiln

#endif // KILN_PASSES_HLOTOLINALG_HOSTCALLS_H
