// Writes replace a file atomically: a failed write leaves the previous file
// as it was and no temporary file behind.
#include "format/AtomicFileWriter.h"
#include "stringrt/Safetensors.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <csignal>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace stringrt {
namespace {

using test::failsWith;
using test::readFile;
using test::TempDir;

// A checkpoint to overwrite, and a check that it is still the one written.
class AtomicWriteTest : public ::testing::Test {
protected:
  void SetUp() override {
    path_ = dir_.file("ckpt.safetensors");
    writeSafetensors(path_, {{"w", DType::F32, {3}, oldValues_.data()}});
    oldBytes_ = readFile(path_);
  }

  void expectOldFileIntact() {
    EXPECT_EQ(readFile(path_), oldBytes_);
    EXPECT_EQ(SafetensorsFile::open(path_).readF32("w"), oldValues_);
    EXPECT_EQ(dir_.entries(), std::vector<std::string>{"ckpt.safetensors"})
        << "a temporary file was left behind";
  }

  TempDir dir_;
  std::string path_;
  std::vector<float> oldValues_ = {1.f, 2.f, 3.f};
  std::string oldBytes_;
};

TEST_F(AtomicWriteTest, ReplacesThePreviousFile) {
  std::vector<float> newValues = {4.f, 5.f};
  writeSafetensors(path_, {{"w", DType::F32, {2}, newValues.data()}});
  EXPECT_EQ(SafetensorsFile::open(path_).readF32("w"), newValues);
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST_F(AtomicWriteTest, InvalidTensorsLeaveThePreviousFile) {
  std::vector<float> newValues = {4.f, 5.f};
  EXPECT_TRUE(failsWith(
      [&] {
        writeSafetensors(path_, {{"w", DType::F32, {2}, newValues.data()},
                                 {"w", DType::F32, {2}, newValues.data()}});
      },
      path_, {"cannot write tensor \"w\" twice"}));
  expectOldFileIntact();
}

TEST_F(AtomicWriteTest, FailureWhileWritingLeavesThePreviousFile) {
  // Cap the file size so that write() fails with EFBIG halfway through.
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto previousHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit capped = saved;
  capped.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &capped), 0);
  std::vector<float> large(1 << 16, 7.f);
  bool failed = failsWith(
      [&] {
        writeSafetensors(path_, {{"w", DType::F32, {1 << 16}, large.data()}});
      },
      path_, {"writing " + path_ + ".tmp.", "failed: File too large"});
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previousHandler);
  EXPECT_TRUE(failed);
  expectOldFileIntact();
}

TEST_F(AtomicWriteTest, PathThatIsADirectoryIsLeftAlone) {
  std::string target = dir_.file("subdir");
  std::filesystem::create_directory(target);
  std::filesystem::path inside = std::filesystem::path(target) / "keep.txt";
  test::writeFile(inside.string(), "keep");
  std::vector<float> values = {1.f};
  EXPECT_TRUE(failsWith(
      [&] {
        writeSafetensors(target, {{"w", DType::F32, {1}, values.data()}});
      },
      target, {"is a directory"}));
  EXPECT_EQ(readFile(inside.string()), "keep");
  EXPECT_EQ(dir_.entries(),
            (std::vector<std::string>{"ckpt.safetensors", "subdir"}));
}

TEST_F(AtomicWriteTest, MissingDirectory) {
  std::string target = dir_.file("no/such/dir/ckpt.safetensors");
  std::vector<float> values = {1.f};
  EXPECT_TRUE(failsWith(
      [&] {
        writeSafetensors(target, {{"w", DType::F32, {1}, values.data()}});
      },
      target, {"cannot create temporary file", "No such file or directory"}));
  expectOldFileIntact();
}

TEST_F(AtomicWriteTest, ReadOnlyDirectoryLeavesThePreviousFile) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root can write into read-only directories";
  std::filesystem::permissions(dir_.path(),
                               std::filesystem::perms::owner_read |
                                   std::filesystem::perms::owner_exec);
  std::vector<float> values = {9.f};
  bool failed = failsWith(
      [&] {
        writeSafetensors(path_, {{"w", DType::F32, {1}, values.data()}});
      },
      path_, {"cannot create temporary file", "Permission denied"});
  std::filesystem::permissions(dir_.path(), std::filesystem::perms::owner_all);
  EXPECT_TRUE(failed);
  expectOldFileIntact();
}

TEST_F(AtomicWriteTest, WriterWithoutCommitRemovesItsTemporaryFile) {
  {
    detail::AtomicFileWriter writer(path_);
    writer.write("partial", 7);
    EXPECT_TRUE(std::filesystem::exists(writer.tempPath()));
    EXPECT_EQ(writer.tempPath(), path_ + ".tmp." + std::to_string(::getpid()));
  }
  expectOldFileIntact();
}

TEST_F(AtomicWriteTest, ReplacesAStaleTemporaryFile) {
  std::string stale = path_ + ".tmp." + std::to_string(::getpid());
  test::writeFile(stale, std::string(10000, 'x'));
  std::vector<float> newValues = {6.f};
  writeSafetensors(path_, {{"w", DType::F32, {1}, newValues.data()}});
  EXPECT_EQ(SafetensorsFile::open(path_).readF32("w"), newValues);
  EXPECT_FALSE(std::filesystem::exists(stale));
}

} // namespace
} // namespace stringrt
