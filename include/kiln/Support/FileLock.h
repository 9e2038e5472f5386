//===- FileLock.h - One process at a time on a folder -----------*- C++ -*-===//
//
// An exclusive flock on a lock file, with who holds it (pid, host, start
// time) written in the file so a refused process can name the holder. The
// kernel releases it however the holder ends, SIGKILL included: a lock file
// left behind never blocks anyone. `kiln train` holds its checkpoint folder,
// `kiln compile` its output folder.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_FILELOCK_H
#define KILN_SUPPORT_FILELOCK_H

#include <string>

namespace kiln {

class FileLock {
public:
  /// Locks `path` (created if absent) when no other process holds it;
  /// otherwise acquired() is false and holder() says who does. Throws
  /// kiln::Error, naming `option` (the setting that chose the path), when the
  /// file cannot be opened or locked.
  FileLock(const std::string &path, const std::string &option);
  ~FileLock();
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;

  bool acquired() const { return fd_ >= 0; }
  /// "pid 123 on host h, since 2026-12-06T07:00:00Z", or "holder not
  /// recorded".
  const std::string &holder() const { return holder_; }

private:
  int fd_ = -1;
  std::string holder_;
};

} // namespace kiln

#endif // KILN_SUPPORT_FILELOCK_H
