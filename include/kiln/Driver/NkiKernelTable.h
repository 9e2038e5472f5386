//===- NkiKernelTable.h - kernels.json: what the binder traces ---*- C++ -*-===//
//
// `kiln compile` writes kernels.json beside model.hlo.pb: every NKI custom
// call of the module by instruction name, with the NKI Library function it
// is bound to (NkiBinding), each tensor argument in signature order with the
// shape and dtype the kernel sees, the keyword arguments, the results and
// the operands they alias, the target and the LNC. On the SDK host the
// binder (bind_kernels.py) traces each distinct (function, shapes,
// keywords) once and writes the payload into those calls' backend_config.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_NKIKERNELTABLE_H
#define KILN_DRIVER_NKIKERNELTABLE_H

#include "proto/hlo.pb.h"

#include "kiln/Support/ClosedSets.h"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace kiln {

/// The kernels.json of `module`, compiled for `target` at `lnc`. A call
/// whose kernel has no NKI Library binding yet is listed with "binding":
/// null and why. Throws kiln::Error on a custom call whose backend_config is
/// not Kiln's.
nlohmann::json nkiKernelTable(const xla::HloModuleProto &module, TargetName target, int64_t lnc);

} // namespace kiln

#endif // KILN_DRIVER_NKIKERNELTABLE_H
