//===- AtomicDirectory.cpp - A directory replaced as a whole --------------===//

#include "kiln/Support/AtomicDirectory.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace kiln {

namespace fs = std::filesystem;

std::string trimTrailingSlashes(const std::string &dir) {
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/')
    trimmed.pop_back();
  return trimmed;
}

void writeDirectoryAtomic(const std::string &dir,
                          const std::function<void(const std::string &)> &fill) {
  std::string trimmed = trimTrailingSlashes(dir);
  fs::path target(trimmed);
  fs::path tmp = trimmed + fmt::format(".tmp.{}", ::getpid());
  fs::path old = trimmed + fmt::format(".old.{}", ::getpid());
  std::error_code ec;
  try {
    if (target.has_parent_path())
      fs::create_directories(target.parent_path());
    fs::remove_all(tmp); // a leftover of a killed process that had our pid
    fs::create_directory(tmp);
    fill(tmp.string());
    bool hadOld = fs::exists(target);
    // Replacing: swap the two directories in one step; the old one ends up
    // at `tmp` and is removed.
    if (hadOld && ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(),
                              RENAME_EXCHANGE) == 0) {
      fs::remove_all(tmp, ec);
      return;
    }
    if (hadOld && errno != EINVAL)
      throw fs::filesystem_error("cannot swap the new directory into place", tmp, target,
                                 std::error_code(errno, std::generic_category()));
    if (hadOld)
      fs::rename(target, old);
    fs::rename(tmp, target, ec);
    if (ec) {
      if (hadOld)
        fs::rename(old, target, ec); // best effort: put the previous one back
      throw fs::filesystem_error("cannot move the new directory into place", tmp, target, ec);
    }
    // The new directory is complete; a stale old copy is only wasted space.
    fs::remove_all(old, ec);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

std::vector<std::string> removeTemporarySiblings(const std::string &dir) {
  std::vector<std::string> removed;
  fs::path target(trimTrailingSlashes(dir));
  fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string name = target.filename().string();
  std::error_code ec;
  if (name.empty() || !fs::is_directory(parent, ec))
    return removed;
  for (const auto &entry : fs::directory_iterator(parent, ec)) {
    std::string sibling = entry.path().filename().string();
    for (const char *kind : {".tmp.", ".old."}) {
      std::string prefix = name + kind;
      if (sibling.size() > prefix.size() && sibling.compare(0, prefix.size(), prefix) == 0 &&
          sibling.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
        fs::remove_all(entry.path(), ec);
        removed.push_back(entry.path().string());
      }
    }
  }
  return removed;
}

} // namespace kiln
