//===- HostFunctions.h - What compiled code calls in the host ---*- C++ -*-===//
//
// The runtime side of kiln/Passes/HloToLinalg/HostCalls.h that needs no
// step-specific state: every CompiledFunction binds these.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_COMPILED_HOSTFUNCTIONS_H
#define KILN_BACKEND_COMPILED_HOSTFUNCTIONS_H

#include "mlir/ExecutionEngine/CRunnerUtils.h"

/// kiln_sgemm's C interface: table = [batch, m, n, k, transposeA,
/// transposeB, A, B, C], C[b] = op(A[b]) op(B[b]) by OpenBLAS.
extern "C" void kilnSgemm(StridedMemRefType<int64_t, 1> *table);

#endif // KILN_BACKEND_COMPILED_HOSTFUNCTIONS_H
