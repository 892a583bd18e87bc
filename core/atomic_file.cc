#include "core/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "core/env_lookup.h"

namespace hypertrain {
namespace {

// Failure-injection budget: < 0 disabled. Initialised from the environment on
// first use so a test binary (or a child process) can set it without code.
std::atomic<int64_t> g_budget{-1};
std::once_flag g_budget_once;

void InitBudgetFromEnv() {
  std::call_once(g_budget_once, [] {
    // A process-wide fault-injection hook for tests, not configuration: read
    // through the one process lookup (core/env_lookup.h), once per process.
    const char* v = ProcessEnvironment()("HYPERTRAIN_CKPT_FAIL_AFTER_BYTES");
    if (v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long long n = std::strtoll(v, &end, 10);
      if (end != v && *end == '\0' && n >= 0) g_budget.store(n);
    }
  });
}

// How many of `want` bytes may be written before the injected failure; sets
// `fail` when the budget is exhausted by this write.
size_t ConsumeBudget(size_t want, bool* fail) {
  InitBudgetFromEnv();
  *fail = false;
  int64_t cur = g_budget.load();
  while (cur >= 0) {
    const int64_t take = std::min<int64_t>(cur, static_cast<int64_t>(want));
    if (g_budget.compare_exchange_weak(cur, cur - take)) {
      if (take < static_cast<int64_t>(want)) *fail = true;
      return static_cast<size_t>(take);
    }
  }
  return want;
}

std::string ParentDir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::atomic<uint64_t> g_tmp_counter{0};

Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  bool inject = false;
  size_t allowed = ConsumeBudget(size, &inject);
  while (allowed > 0) {
    const ssize_t n = ::write(fd, p, allowed);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path, errno);
    }
    p += n;
    allowed -= static_cast<size_t>(n);
  }
  if (inject) return ErrnoStatus("write (injected by HYPERTRAIN_CKPT_FAIL_AFTER_BYTES)", path, ENOSPC);
  return Status::Ok();
}

}  // namespace

void SetWriteFailureBudget(int64_t bytes) {
  InitBudgetFromEnv();
  g_budget.store(bytes < 0 ? -1 : bytes);
}

bool IsPathConfigErrno(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
      return true;
    default:
      return false;
  }
}

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string m = what + " " + path + ": " + std::strerror(err);
  if (IsPathConfigErrno(err)) return InvalidArgument(std::move(m) + " (fix the path or its permissions)");
  return IoError(std::move(m));
}

StatusOr<AtomicFileWriter> AtomicFileWriter::Open(const std::string& path, mode_t mode) {
  AtomicFileWriter w;
  w.path_ = path;
  w.tmp_path_ = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                std::to_string(g_tmp_counter.fetch_add(1));
  const int fd = ::open(w.tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus("create", w.tmp_path_, errno);
  w.fd_ = Fd(fd);
  return w;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_ && !tmp_path_.empty()) {
    fd_ = Fd();
    ::unlink(tmp_path_.c_str());
  }
}

Status AtomicFileWriter::Append(const void* data, size_t size) {
  if (!fd_.valid()) return FailedPrecondition("write to " + path_ + " after Commit or failure");
  Status s = WriteAll(fd_.get(), data, size, tmp_path_);
  if (!s.ok()) return s;
  bytes_ += static_cast<int64_t>(size);
  crc_ = Crc32cExtend(crc_, data, size);
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (!fd_.valid()) return FailedPrecondition("commit of " + path_ + " after Commit or failure");
  if (::fsync(fd_.get()) != 0) return ErrnoStatus("fsync", tmp_path_, errno);
  HT_RETURN_IF_ERROR(fd_.Close(tmp_path_));
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus("rename to " + path_ + " of", tmp_path_, errno);
  }
  committed_ = true;
  return FsyncDir(ParentDir(path_));
}

Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) {
  HT_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open(path, mode));
  HT_RETURN_IF_ERROR(w.Append(data));
  return w.Commit();
}

Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open directory", dir, errno);
  Fd guard(fd);
  if (::fsync(fd) != 0) return ErrnoStatus("fsync directory", dir, errno);
  return Status::Ok();
}

Status RenameDurably(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus("rename to " + to + " of", from, errno);
  }
  HT_RETURN_IF_ERROR(FsyncDir(ParentDir(to)));
  if (ParentDir(from) != ParentDir(to)) HT_RETURN_IF_ERROR(FsyncDir(ParentDir(from)));
  return Status::Ok();
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no file " + path);
    return ErrnoStatus("open", path, errno);
  }
  Fd guard(fd);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status PreadExact(int fd, void* dst, size_t size, int64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read", path, errno);
    }
    if (n == 0) {
      return DataLoss(path + " is truncated: wanted " + std::to_string(size) + " more bytes at offset " +
                      std::to_string(offset));
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  // Classified as every other file error here: a read-only volume or a
  // permission is the path's problem (exit 2), not a retryable I/O error.
  if (ec) return ErrnoStatus("remove", path, ec.value());
  return Status::Ok();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return InvalidArgument("mkdir -p of an empty path");
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir -p", prefix, errno);
    if (end == std::string::npos) break;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("mkdir -p", path, errno);
  if (!S_ISDIR(st.st_mode)) return ErrnoStatus("mkdir -p", path, ENOTDIR);
  return Status::Ok();
}

StatusOr<int64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound("no file " + path);
    return ErrnoStatus("stat", path, errno);
  }
  return static_cast<int64_t>(st.st_size);
}

StatusOr<uint32_t> FileCrc32c(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no file " + path);
    return ErrnoStatus("open", path, errno);
  }
  Fd guard(fd);
  std::vector<char> buf(4 << 20);
  uint32_t crc = 0;
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read", path, errno);
    }
    if (n == 0) break;
    crc = Crc32cExtend(crc, buf.data(), static_cast<size_t>(n));
  }
  return crc;
}

}  // namespace hypertrain
