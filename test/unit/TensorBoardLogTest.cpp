//===- TensorBoardLogTest.cpp - TensorBoard event files -------------------===//
//
// The CRC-32C TFRecord framing needs, against the published check values
// (RFC 3720's iSCSI vectors and the "123456789" check of the catalogue of
// CRC parameters), and a written file's framing read back byte by byte.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Driver/TensorBoardLog.h"
#include "kiln/Support/Json.h"

#include "proto/event.pb.h"

#include <cstring>
#include <filesystem>

using namespace kiln;

namespace {

TEST(TensorBoardLogTest, Crc32cMatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0x00), ones(32, 0xFF), ascending(32);
  for (int i = 0; i < 32; ++i)
    ascending[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), 32), 0x46DD794Eu);
  // TFRecord's mask: rotate right by 15, add 0xa282ead8.
  uint32_t c = crc32c("123456789", 9);
  EXPECT_EQ(maskedCrc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

TEST(TensorBoardLogTest, RecordsAreFramedEventsWithTheFileVersionFirst) {
  kiln::test::TempDir dir;
  std::string path;
  {
    TensorBoardLog log(dir.path() + "/runs/now");
    log.scalars(7, {{"grad_norm", 1.5}, {"loss_metrics/global_avg_loss", 2.25}});
    path = log.path();
  }
  EXPECT_NE(std::filesystem::path(path).filename().string().find("events.out.tfevents."),
            std::string::npos);
  std::string bytes = readFile(path);
  std::vector<tensorboard::Event> events;
  for (size_t at = 0; at < bytes.size();) {
    ASSERT_LE(at + 12, bytes.size());
    uint64_t length;
    std::memcpy(&length, bytes.data() + at, 8);
    uint32_t lengthCrc, dataCrc;
    std::memcpy(&lengthCrc, bytes.data() + at + 8, 4);
    EXPECT_EQ(lengthCrc, maskedCrc32c(bytes.data() + at, 8));
    ASSERT_LE(at + 16 + length, bytes.size());
    std::memcpy(&dataCrc, bytes.data() + at + 12 + length, 4);
    EXPECT_EQ(dataCrc, maskedCrc32c(bytes.data() + at + 12, length));
    tensorboard::Event event;
    ASSERT_TRUE(event.ParseFromArray(bytes.data() + at + 12, int(length)));
    events.push_back(event);
    at += 16 + length;
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 7);
  ASSERT_EQ(events[1].summary().value_size(), 2);
  EXPECT_EQ(events[1].summary().value(0).tag(), "grad_norm");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 1.5f);
  EXPECT_EQ(events[1].summary().value(1).tag(), "loss_metrics/global_avg_loss");
  EXPECT_EQ(events[1].summary().value(1).simple_value(), 2.25f);
  EXPECT_GT(events[1].wall_time(), 1.7e9);
}

TEST(TensorBoardLogTest, AFolderThatCannotBeMadeNamesTheKey) {
  kiln::test::TempDir dir;
  writeFileAtomic(dir.path() + "/file", "x");
  kiln::test::expectError([&] { TensorBoardLog log(dir.path() + "/file/tb"); },
                          {"metrics.save_tb_folder: cannot create", "file/tb"});
}

} // namespace
