//===- CheckpointCommand.cpp - kiln ckpt ----------------------------------===//
//
//   kiln ckpt diff <checkpoint-a> <checkpoint-b>
//
// Prints the report of formatCheckpointDiff, then exits 1 if the checkpoints
// differ in keys, shapes or dtypes, 0 if they match (values may differ).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>

namespace kiln {

int runCheckpoint(const std::vector<std::string> &args) {
  if (args.size() != 3 || args[0] != "diff")
    fail("ckpt: usage: kiln ckpt diff <checkpoint-a> <checkpoint-b> (exit status 1 if "
         "keys, shapes or dtypes differ)");
  CheckpointDiff diff = diffCheckpoints(args[1], args[2]);
  fmt::print("{}", formatCheckpointDiff(diff, args[1], args[2]));
  // Like diff(1), the status says whether the checkpoints differ, so a script
  // can check that one loads in place of the other. Values differing is
  // expected (training, dtype casts): max_abs_diff reports it, status 0.
  bool differ = !diff.missing.empty() || !diff.unexpected.empty() || !diff.mismatched.empty();
  return differ ? 1 : 0;
}

} // namespace kiln
