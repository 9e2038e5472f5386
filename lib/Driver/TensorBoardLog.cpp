//===- TensorBoardLog.cpp - Scalars as TensorBoard event files ------------===//

#include "kiln/Driver/TensorBoardLog.h"
#include "kiln/Support/Error.h"

#include "proto/event.pb.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace kiln {

namespace {

/// The reflected Castagnoli polynomial's table, one entry per byte value.
const std::array<uint32_t, 256> &crc32cTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0u);
      t[i] = c;
    }
    return t;
  }();
  return table;
}

double secondsSinceEpoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

uint32_t crc32c(const void *data, size_t size) {
  const auto &table = crc32cTable();
  uint32_t c = 0xFFFFFFFFu;
  for (const auto *p = static_cast<const unsigned char *>(data), *e = p + size; p != e; ++p)
    c = table[(c ^ *p) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t maskedCrc32c(const void *data, size_t size) {
  uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

TensorBoardLog::TensorBoardLog(const std::string &folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec)
    fail("metrics.save_tb_folder: cannot create '{}': {}", folder, ec.message());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  path_ = (std::filesystem::path(folder) /
           fmt::format("events.out.tfevents.{}.{}.{}", int64_t(secondsSinceEpoch()), host,
                       int64_t(::getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    fail("metrics.save_tb_folder: cannot write '{}': {}", path_, std::strerror(errno));
  tensorboard::Event version;
  version.set_wall_time(secondsSinceEpoch());
  version.set_file_version("brain.Event:2");
  record(version.SerializeAsString());
}

TensorBoardLog::~TensorBoardLog() {
  if (file_)
    std::fclose(file_);
}

void TensorBoardLog::scalars(int64_t step,
                             const std::vector<std::pair<std::string, double>> &values) {
  tensorboard::Event event;
  event.set_wall_time(secondsSinceEpoch());
  event.set_step(step);
  for (const auto &[tag, value] : values) {
    tensorboard::Summary::Value *v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(float(value));
  }
  record(event.SerializeAsString());
}

void TensorBoardLog::record(const std::string &bytes) {
  // TFRecord: little-endian length, its masked CRC, the bytes, theirs.
  uint64_t length = bytes.size();
  unsigned char header[12];
  for (int i = 0; i < 8; ++i)
    header[i] = static_cast<unsigned char>(length >> (8 * i));
  uint32_t lengthCrc = maskedCrc32c(header, 8), dataCrc = maskedCrc32c(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i)
    header[8 + i] = static_cast<unsigned char>(lengthCrc >> (8 * i));
  unsigned char footer[4];
  for (int i = 0; i < 4; ++i)
    footer[i] = static_cast<unsigned char>(dataCrc >> (8 * i));
  if (std::fwrite(header, 1, sizeof header, file_) != sizeof header ||
      std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size() ||
      std::fwrite(footer, 1, sizeof footer, file_) != sizeof footer || std::fflush(file_) != 0)
    fail("metrics.save_tb_folder: cannot write '{}': {}", path_, std::strerror(errno));
}

} // namespace kiln
