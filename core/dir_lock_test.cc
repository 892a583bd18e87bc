// DirLock between real processes: a second process is refused naming the
// holder's host and pid; the holder's death (SIGKILL) frees the lock; a clean
// release removes the file.
#include "core/dir_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace hypertrain {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(t != nullptr ? t : "/tmp") + "/dir_lock.XXXXXX";
  return ::mkdtemp(tmpl.data());
}

// A child process that takes the lock, reports on a pipe and waits to be killed.
pid_t HoldInChild(const std::string& path) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    StatusOr<DirLock> lock = DirLock::Acquire(path, "test dir");
    const char c = lock.ok() && lock->held() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  const bool ok = ::read(ready[0], &c, 1) == 1 && c == 'y';
  ::close(ready[0]);
  return ok ? pid : -1;
}

TEST(DirLockTest, SecondProcessIsRefusedNamingTheHolderUntilItDies) {
  const std::string path = TempDir() + "/.lock";
  const pid_t holder = HoldInChild(path);
  ASSERT_GT(holder, 0);
  StatusOr<DirLock> refused = DirLock::Acquire(path, "exp_manager.exp_dir /x");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("exp_manager.exp_dir /x is in use by another process"), std::string::npos) << m;
  EXPECT_NE(m.find("pid " + std::to_string(holder)), std::string::npos) << m;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_NE(m.find(std::string("host ") + host), std::string::npos) << m;

  ::kill(holder, SIGKILL);  // no cleanup runs: the kernel releases the lock
  int st = 0;
  ASSERT_EQ(::waitpid(holder, &st, 0), holder);
  StatusOr<DirLock> taken = DirLock::Acquire(path, "exp_manager.exp_dir /x");
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_TRUE(taken->held());
  *taken = DirLock();  // release
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(DirLockTest, MissingDirectoryNamesThePath) {
  StatusOr<DirLock> r = DirLock::Acquire(TempDir() + "/no/such/.lock", "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/no/such/.lock"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hypertrain
