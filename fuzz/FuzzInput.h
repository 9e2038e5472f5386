//===- FuzzInput.h - Hand a fuzzer's bytes to Kiln's file readers -*- C++ -*-===//
//
// Kiln's readers take paths (they check the file kind, map it, name it in
// errors), so each input becomes an in-memory file: a memfd, reached as
// /proc/self/fd/N, a regular file to stat().
//
//===----------------------------------------------------------------------===//
#ifndef KILN_FUZZ_FUZZINPUT_H
#define KILN_FUZZ_FUZZINPUT_H

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace kiln::fuzz {

class MemoryFile {
public:
  MemoryFile(const uint8_t *data, size_t size) : fd_(memfd_create("kiln-fuzz", 0)) {
    if (fd_ < 0 || ::write(fd_, data, size) != ssize_t(size))
      std::abort(); // the harness, not the input, is broken
  }
  ~MemoryFile() { ::close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
  int fd_;
};

} // namespace kiln::fuzz

#endif // KILN_FUZZ_FUZZINPUT_H
