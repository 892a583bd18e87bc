#pragma once
// Crash-safe file I/O: checkpoints, the local control plane's state and
// credentials, files the node agent materialises for pods.
//
// AtomicFileWriter writes `path` through a temporary file in the same
// directory ("<name>.tmp-<pid>-<n>"), and Commit() makes it visible only once
// it is complete: fsync(file), rename(tmp, path), fsync(directory). A crash at
// any moment leaves either the old `path` (or none) or the complete new one;
// a writer destroyed without Commit() removes its temporary file.
//
// Every error names the path and the errno text (ENOSPC reads "No space left
// on device"). For tests, a process-wide byte budget makes writes fail like a
// full disk once it is used up: env HYPERTRAIN_CKPT_FAIL_AFTER_BYTES=<n>
// (read on first use) or SetWriteFailureBudget().
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/crc32c.h"
#include "core/fd.h"

namespace hypertrain {

// Failure injection: after `bytes` more bytes written through this module in
// this process, every write fails with ENOSPC. Negative disables it.
void SetWriteFailureBudget(int64_t bytes);

// "<what> <path>: <strerror(err)>" as an IoError (DataLoss never: the caller
// decides what a failed write means), except for errors no retry cures — a
// path that is not writable or not a directory (EACCES, EPERM, EROFS,
// ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP) — which are InvalidArgument: a
// configuration error (exit 2), not a transient I/O fault (exit 200).
Status ErrnoStatus(const std::string& what, const std::string& path, int err);
// Whether errno `err` is one of those configuration errors.
bool IsPathConfigErrno(int err);

class AtomicFileWriter {
 public:
  // Creates the temporary file next to `path` with `mode` (before the umask;
  // 0600 for keys and tokens): the file never exists with wider permissions.
  static StatusOr<AtomicFileWriter> Open(const std::string& path, mode_t mode = 0644);
  AtomicFileWriter(AtomicFileWriter&&) noexcept = default;
  AtomicFileWriter& operator=(AtomicFileWriter&&) noexcept = default;
  ~AtomicFileWriter();

  Status Append(const void* data, size_t size);
  Status Append(std::string_view s) { return Append(s.data(), s.size()); }
  // fsync + close + rename + fsync(parent directory). The writer is spent
  // afterwards, whatever the result.
  Status Commit();

  int64_t bytes_written() const { return bytes_; }
  uint32_t crc32c() const { return crc_; }
  const std::string& path() const { return path_; }

 private:
  AtomicFileWriter() = default;
  std::string path_;
  std::string tmp_path_;
  Fd fd_;
  int64_t bytes_ = 0;
  uint32_t crc_ = 0;
  bool committed_ = false;
};

// One-shot atomic write of `data` to `path` (created with `mode`, see Open).
Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode = 0644);
// fsync of a directory (makes renames/creations inside it durable).
Status FsyncDir(const std::string& dir);
// rename(2) + fsync of the parent directory of `to` (and of `from` when it
// differs).
Status RenameDurably(const std::string& from, const std::string& to);
// Whole file; NotFound when absent.
StatusOr<std::string> ReadFileToString(const std::string& path);
// Exactly `size` bytes at `offset`; DataLoss when the file is shorter.
Status PreadExact(int fd, void* dst, size_t size, int64_t offset, const std::string& path);
// Recursive removal of a directory tree (no error if absent). Errors are
// ErrnoStatus's: EROFS, EACCES and the like InvalidArgument, others IoError.
Status RemoveTree(const std::string& path);
// mkdir -p; directories it creates get `mode` (before the umask; 0700 keeps a
// data directory private). Existing ones are left as they are.
Status MakeDirs(const std::string& path, mode_t mode = 0777);
// File size; NotFound when absent.
StatusOr<int64_t> FileSize(const std::string& path);
// crc32c of a whole file (streamed).
StatusOr<uint32_t> FileCrc32c(const std::string& path);

}  // namespace hypertrain
