//===- OpClass.h - The engine class an op's work runs on ---------*- C++ -*-===//
//
// Each kiln op says through CostOpInterface::getOpClass which of a target's
// achieved peaks its FLOPs run at; the planner's profiles (TargetProfile)
// state one efficiency per class. Here, not in the planner, so that the
// dialect (and the kernel specs it looks up) can answer without depending
// on it.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_OPCLASS_H
#define KILN_DIALECT_KILN_IR_OPCLASS_H

namespace kiln {
/// GEMMs (the tensor engines), attention (GEMMs interleaved with softmax) and
/// everything else (the vector units).
enum class OpClass { Matmul, Attention, Vector };
} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_OPCLASS_H
