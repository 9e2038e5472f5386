//===- NkiBinder.h - bind_kernels.py, the binder on the SDK host -*- C++ -*-===//
//
// kiln compile writes bind_kernels.py beside a module that has NKI custom
// calls; compile.sh runs it before neuronx-cc. On a machine with the Neuron
// SDK it traces each call's NKI Library function (kernels.json) with the
// installed NKI frontend and writes the payloads into model.hlo.pb
// (docs/kernels.md, NKI Library bindings). Its source is
// lib/Driver/bind_kernels.py, compiled in.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_NKIBINDER_H
#define KILN_DRIVER_NKIBINDER_H

#include <string>

namespace kiln {

/// The binder as written into an artifact directory: the script with the
/// serialized descriptor of Kiln's hlo.proto filled in, so that it reads
/// and writes the module with any protobuf runtime.
std::string nkiBinderScript();

/// The module Kiln wrote in `dir`: model.unbound.hlo.pb once the binder has
/// replaced model.hlo.pb with the traced calls (whose backend_config Kiln's
/// evaluator cannot run), else model.hlo.pb. kiln check-hlo evaluates it.
std::string kilnModuleFile(const std::string &dir);

} // namespace kiln

#endif // KILN_DRIVER_NKIBINDER_H
