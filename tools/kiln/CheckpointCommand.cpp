//===- CheckpointCommand.cpp - kiln ckpt ----------------------------------===//

#include "Commands.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>

namespace kiln {

int runCheckpoint(const std::vector<std::string> &args) {
  if (args.size() != 3 || args[0] != "diff")
    fail("ckpt: usage: kiln ckpt diff <checkpoint-a> <checkpoint-b>");
  CheckpointDiff diff = diffCheckpoints(args[1], args[2]);
  fmt::print("{}", formatCheckpointDiff(diff, args[1], args[2]));
  return 0;
}

} // namespace kiln
