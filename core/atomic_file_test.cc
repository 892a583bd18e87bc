#include "core/atomic_file.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

namespace hypertrain {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/atomic_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { SetWriteFailureBudget(-1); }
  int CountEntries() const {
    int n = 0;
    for (auto& e : fs::directory_iterator(dir_)) (void)e, ++n;
    return n;
  }
  std::string dir_;
};

TEST_F(AtomicFileTest, WritesReplacesAndLeavesNoTemporaries) {
  const std::string p = dir_ + "/f.json";
  ASSERT_TRUE(WriteFileAtomically(p, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(p, "second, longer").ok());
  EXPECT_EQ(*ReadFileToString(p), "second, longer");
  EXPECT_EQ(CountEntries(), 1);
  EXPECT_EQ(*FileSize(p), 14);
  EXPECT_EQ(*FileCrc32c(p), Crc32c("second, longer", 14));
}

TEST_F(AtomicFileTest, UncommittedWriterRemovesItsTemporary) {
  {
    auto w = AtomicFileWriter::Open(dir_ + "/g.bin");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Append("abc").ok());
  }
  EXPECT_EQ(CountEntries(), 0);
}

TEST_F(AtomicFileTest, InjectedDiskFullKeepsOldFileAndNamesThePath) {
  const std::string p = dir_ + "/state.bin";
  ASSERT_TRUE(WriteFileAtomically(p, "old contents").ok());
  SetWriteFailureBudget(5);
  Status s = WriteFileAtomically(p, "new contents that do not fit");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIo);
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(dir_ + "/state.bin.tmp-"), std::string::npos) << s.ToString();
  SetWriteFailureBudget(-1);
  EXPECT_EQ(*ReadFileToString(p), "old contents");
  EXPECT_EQ(CountEntries(), 1);  // the temporary is gone
}

TEST_F(AtomicFileTest, ReadErrorsAreClear) {
  auto r = ReadFileToString(dir_ + "/absent");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/short", "1234").ok());
  const int fd = ::open((dir_ + "/short").c_str(), O_RDONLY);
  Fd guard(fd);
  char buf[8];
  Status s = PreadExact(fd, buf, 8, 0, dir_ + "/short");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated"), std::string::npos);
  Status cf = AtomicFileWriter::Open(dir_ + "/no/such/dir/x").status();
  EXPECT_EQ(cf.code(), StatusCode::kIo);
  EXPECT_NE(cf.message().find("No such file or directory"), std::string::npos);
}

TEST_F(AtomicFileTest, RenameDurablyAndRemoveTree) {
  fs::create_directories(dir_ + "/a/b");
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/a/b/x", "x").ok());
  ASSERT_TRUE(RenameDurably(dir_ + "/a", dir_ + "/c").ok());
  EXPECT_TRUE(fs::exists(dir_ + "/c/b/x"));
  ASSERT_TRUE(RemoveTree(dir_ + "/c").ok());
  EXPECT_EQ(CountEntries(), 0);
  EXPECT_TRUE(RemoveTree(dir_ + "/absent").ok());
  // A path error (as EROFS on a volume turned read-only) is the path's
  // problem, not a retryable I/O error: the same class as a failed rename.
  const Status long_name = RemoveTree(dir_ + "/" + std::string(300, 'n'));
  EXPECT_EQ(long_name.code(), StatusCode::kInvalidArgument) << long_name.ToString();
  EXPECT_NE(long_name.message().find("File name too long"), std::string::npos) << long_name.ToString();
}

TEST_F(AtomicFileTest, ModesOfFilesAndDirectories) {
  const mode_t old_umask = ::umask(022);
  const std::string key = dir_ + "/key.pem";
  ASSERT_TRUE(WriteFileAtomically(key, "old", 0644).ok());
  ASSERT_TRUE(WriteFileAtomically(key, "secret", 0600).ok());  // replaced, not chmod-ed after the fact
  EXPECT_EQ(fs::status(key).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(MakeDirs(dir_ + "/private/state/", 0700).ok());
  EXPECT_EQ(fs::status(dir_ + "/private/state").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_TRUE(MakeDirs(dir_ + "/private/state").ok());  // exists: fine
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/file", "x").ok());
  Status s = MakeDirs(dir_ + "/file/sub");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);  // a path under a file: configuration (issue 18)
  EXPECT_NE(s.message().find("Not a directory"), std::string::npos) << s.ToString();
  ::umask(old_umask);
}

}  // namespace
}  // namespace hypertrain
