#include "core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/atomic_file.h"
#include "core/time.h"

namespace hypertrain {
namespace {

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown-host";
  return host;
}

// The holder writes its line just after locking: a refused process may read
// the file before that, so it looks again for a short while.
std::string ReadHolder(const std::string& path) {
  for (int i = 0; i < 25; ++i) {
    StatusOr<std::string> text = ReadFileToString(path);
    if (text.ok() && !text->empty()) {
      std::string line = *text;
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      return line;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "an unknown holder (the lock file is empty)";
}

bool Unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

}  // namespace

DirLock::DirLock(DirLock&& o) noexcept : fd_(std::move(o.fd_)), path_(std::move(o.path_)) {}

DirLock& DirLock::operator=(DirLock&& o) noexcept {
  if (this != &o) {
    Release();
    fd_ = std::move(o.fd_);
    path_ = std::move(o.path_);
  }
  return *this;
}

DirLock::~DirLock() { Release(); }

void DirLock::Release() {
  if (!fd_.valid()) return;
  ::unlink(path_.c_str());  // still locked: nobody else holds this inode
  fd_.reset();
}

StatusOr<DirLock> DirLock::Acquire(const std::string& path, const std::string& what) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoStatus("create the lock file", path, errno);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        return InvalidArgument(what + " is in use by another process: " + ReadHolder(path) + " holds " + path +
                               " (two runs on one directory would overwrite each other's files); stop it, or "
                               "give this run another directory");
      }
      if (Unsupported(err)) {
        spdlog::warn("{}: cannot lock {} ({}): a second run on it would not be detected", what, path,
                     std::strerror(err));
        return DirLock();
      }
      return ErrnoStatus("flock", path, err);
    }
    // The previous holder may have removed the file between our open and our
    // flock: then we locked an orphan inode; take the new file instead.
    struct stat opened {}, named {};
    if (::fstat(fd.get(), &opened) != 0) return ErrnoStatus("fstat", path, errno);
    if (::stat(path.c_str(), &named) != 0 || named.st_ino != opened.st_ino || named.st_dev != opened.st_dev) {
      continue;
    }
    const std::string line = "host " + HostName() + ", pid " + std::to_string(::getpid()) + " (since " +
                             FormatRfc3339(std::chrono::system_clock::now(), false) + ")\n";
    if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), line.data(), line.size(), 0) !=
                                             static_cast<ssize_t>(line.size())) {
      return ErrnoStatus("write the lock file", path, errno);
    }
    DirLock lock;
    lock.fd_ = std::move(fd);
    lock.path_ = path;
    return lock;
  }
  return IoError("flock " + path + ": the lock file kept being replaced (10 attempts)");
}

}  // namespace hypertrain
