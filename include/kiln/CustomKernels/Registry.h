//===- Registry.h - The custom kernels override rules may use ---*- C++ -*-===//
//
// Every kernel override rules may substitute (lib/CustomKernels, one file
// per kernel): nki_rope, nki_flash_attention, nki_rms_norm, nki_grouped_experts
// and the CPU-only chunked_cross_entropy.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CUSTOMKERNELS_REGISTRY_H
#define KILN_CUSTOMKERNELS_REGISTRY_H

namespace kiln {
/// Registers every kernel's KernelSpec (with its CPU implementation); call
/// once before parsing or building IR with kiln.kernel ops. Idempotent.
void registerCustomKernels();
} // namespace kiln

#endif // KILN_CUSTOMKERNELS_REGISTRY_H
