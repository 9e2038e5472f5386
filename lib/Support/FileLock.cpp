//===- FileLock.cpp - One process at a time on a folder -------------------===//

#include "kiln/Support/FileLock.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace kiln {

FileLock::FileLock(const std::string &path, const std::string &option) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    fail("{}: cannot open the lock file '{}': {}", option, path, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    char buffer[512];
    ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
    if (n > 0)
      holder_.assign(buffer, size_t(n));
    while (!holder_.empty() && (holder_.back() == '\n' || holder_.back() == '\0'))
      holder_.pop_back();
    if (holder_.empty())
      holder_ = "holder not recorded";
    ::close(fd);
    if (error != EWOULDBLOCK)
      fail("{}: cannot lock '{}': {}", option, path, std::strerror(error));
    return;
  }
  fd_ = fd;
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  holder_ = fmt::format("pid {} on host {}, since {}", ::getpid(), host, when);
  std::string text = holder_ + "\n";
  // Best effort: the lock is the flock, the text only names its holder.
  if (::ftruncate(fd_, 0) == 0)
    (void)!::pwrite(fd_, text.data(), text.size(), 0);
}

FileLock::~FileLock() {
  if (fd_ >= 0)
    ::close(fd_);
}

} // namespace kiln
