//===- AtomicDirectory.h - A directory replaced as a whole ------*- C++ -*-===//
//
// A checkpoint or a compile's artifacts are one set: a reader must never see
// new files beside old ones. The set is built in a sibling temporary and
// swapped in with one rename, so a kill at any moment leaves the directory
// as it was or complete, plus at most a temporary sibling for the next
// writer to remove.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_ATOMICDIRECTORY_H
#define KILN_SUPPORT_ATOMICDIRECTORY_H

#include <functional>
#include <string>
#include <vector>

namespace kiln {

/// `dir` without trailing slashes ("out/" has siblings "out.tmp.N", not
/// "out/.tmp.N").
std::string trimTrailingSlashes(const std::string &dir);

/// Makes `dir` hold exactly what `fill` writes into the directory it is
/// given (`<dir>.tmp.<pid>`, created empty): an existing `dir` is swapped
/// with it in one step (renameat2 RENAME_EXCHANGE; only file systems without
/// the exchange fall back to two renames) and its old contents removed.
/// Throws what `fill` throws, or std::filesystem_error; the temporary is
/// removed then and `dir` left as it was.
void writeDirectoryAtomic(const std::string &dir,
                          const std::function<void(const std::string &)> &fill);

/// Removes the `<dir>.tmp.<digits>` and `<dir>.old.<digits>` siblings that
/// killed writeDirectoryAtomic calls left; only for a caller that holds
/// `dir` (no live writer can own them). Returns the paths removed.
std::vector<std::string> removeTemporarySiblings(const std::string &dir);

} // namespace kiln

#endif // KILN_SUPPORT_ATOMICDIRECTORY_H
