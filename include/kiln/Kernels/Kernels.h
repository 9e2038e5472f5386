//===- Kernels.h - The registered kernels --------------------------*- C++ -*-===//
//
// Every kernel override rules may substitute (lib/Kernels, one file per
// kernel): nki_rope, nki_flash_attention, nki_rms_norm, nki_grouped_experts
// and the CPU-only chunked_cross_entropy.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_KERNELS_KERNELS_H
#define KILN_KERNELS_KERNELS_H

namespace kiln {
/// Registers every kernel's KernelSpec (with its CPU implementation); call
/// once before parsing or building IR with kiln.kernel ops. Idempotent.
void registerKernels();
} // namespace kiln

#endif // KILN_KERNELS_KERNELS_H
