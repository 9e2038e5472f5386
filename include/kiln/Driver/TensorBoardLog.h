//===- TensorBoardLog.h - Scalars as TensorBoard event files ----*- C++ -*-===//
//
// metrics.enable_tensorboard: a run's scalars by step in TensorBoard's event
// file format, written directly (no TensorFlow): TFRecord framing (length,
// masked CRC-32C of the length, the record, masked CRC-32C of the record)
// around serialized tensorboard.Event messages (proto/event.proto, the
// published field numbers). Each event is flushed as it is written, so a
// killed run leaves a file whose every complete record reads back.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_TENSORBOARDLOG_H
#define KILN_DRIVER_TENSORBOARDLOG_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// CRC-32C (Castagnoli) of `size` bytes, and TFRecord's masked form of it.
uint32_t crc32c(const void *data, size_t size);
uint32_t maskedCrc32c(const void *data, size_t size);

class TensorBoardLog {
public:
  /// Creates `folder` (and its parents) and a new event file in it,
  /// events.out.tfevents.<seconds>.<host>.<pid>, starting with the
  /// file-version event. Throws kiln::Error naming the folder or file.
  explicit TensorBoardLog(const std::string &folder);
  ~TensorBoardLog();
  TensorBoardLog(const TensorBoardLog &) = delete;
  TensorBoardLog &operator=(const TensorBoardLog &) = delete;

  /// One event at `step` holding every (tag, value) as a scalar.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>> &values);
  const std::string &path() const { return path_; }

private:
  void record(const std::string &bytes);
  std::string path_;
  std::FILE *file_ = nullptr;
};

} // namespace kiln

#endif // KILN_DRIVER_TENSORBOARDLOG_H
