//===- Version.cpp - The version of this Kiln build ----------------------===//

#include "kiln/Support/Version.h"
#include "kiln/Support/Version.inc"

namespace kiln {

std::string kilnVersion() { return std::string(KILN_VERSION) + "+" + KILN_COMMIT; }

} // namespace kiln
