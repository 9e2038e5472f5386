//===- TokenBatch.h - Fixed token batches from JSON -------------*- C++ -*-===//
#ifndef KILN_RUNTIME_TOKENBATCH_H
#define KILN_RUNTIME_TOKENBATCH_H

#include "kiln/Runtime/Tensor.h"

#include <string>

namespace kiln {

/// Reads a JSON list of equal-length lists of non-negative token ids into an
/// I64 tensor [batch, length]. Throws kiln::Error naming the file and the
/// offending row.
Tensor readTokenBatch(const std::string &path);

} // namespace kiln

#endif // KILN_RUNTIME_TOKENBATCH_H
