//===- CpuKernelInterface.h - The CPU target's op binding --------*- C++ -*-===//
#ifndef KILN_BACKEND_CPU_CPUKERNELINTERFACE_H
#define KILN_BACKEND_CPU_CPUKERNELINTERFACE_H

#include "kiln/Backend/CPU/ExecutionContext.h"
#include "kiln/Runtime/Tensor.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"

#include "kiln/Backend/CPU/CpuKernelInterface.h.inc"

namespace kiln {
/// Attaches CpuKernelOpInterface to every kiln op (as external models) when
/// the kiln dialect is loaded into a context built from `registry`.
void registerCpuKernels(mlir::DialectRegistry &registry);
/// The same for an existing context (idempotent).
void registerCpuKernels(mlir::MLIRContext &context);
} // namespace kiln

#endif // KILN_BACKEND_CPU_CPUKERNELINTERFACE_H
