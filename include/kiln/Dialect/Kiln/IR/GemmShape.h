//===- GemmShape.h - A BLAS GEMM an op runs as ------------------*- C++ -*-===//
//
// What CostOpInterface::getGemms reports: the row-major sgemms an op's CPU
// kernel issues, C[m, n] (+)= op(A)[m, k] op(B)[k, n]. A target that times
// GEMMs by shape (the cpu target: OpenBLAS's rate swings by 3x with the
// shape, from a thin chunk of logits to a square block) costs these instead
// of the op's FLOPs at its class's achieved peak. Here, with OpClass, so
// that the dialect answers without depending on the planner.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_GEMMSHAPE_H
#define KILN_DIALECT_KILN_IR_GEMMSHAPE_H

#include <cstdint>

namespace kiln {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  /// beta = 1: C is read as well as written (a gradient summed over chunks).
  bool accumulate = false;
  int64_t count = 1; ///< how many times the op issues it

  double flops() const { return 2.0 * double(m) * double(n) * double(k) * double(count); }
};

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_GEMMSHAPE_H
