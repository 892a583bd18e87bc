#pragma once
// An exclusive lock that keeps two processes off one directory (a trainer's
// exp_dir, `prepare`'s output): flock(2) on a lock file, which the kernel
// releases when the holder dies however it dies (kill -9 included), so a
// crashed holder never blocks the next run. The file holds the holder's
// host, pid and start time, for the message of whoever is refused.
//
//   auto lock = DirLock::Acquire(path, "exp_manager.exp_dir /x");
//   // lock held while the DirLock lives; the file is removed on release
//
// The lock file is written in place, not by rename: the lock belongs to the
// inode, and a rename would give the next process another one. Removing it
// on release is safe because Acquire checks, once locked, that the path
// still names the locked inode (else it retries on the new file).
//
// On a network file system flock works across nodes where the client maps it
// to byte-range locks (NFSv4, Lustre mounted with -o flock); where the file
// system refuses it (ENOLCK, EOPNOTSUPP, ENOSYS) Acquire warns and returns an
// unlocked DirLock: the run goes on unprotected, as before.
#include <string>

#include "core/fd.h"
#include "core/status.h"

namespace hypertrain {

class DirLock {
 public:
  DirLock() = default;
  DirLock(DirLock&& o) noexcept;
  DirLock& operator=(DirLock&& o) noexcept;
  ~DirLock();  // releases: removes the file, then closes (unlocks)

  // Takes the lock on `path` (created 0644 if missing; its directory must
  // exist). Held by another process: InvalidArgument (exit 2) "<what> is in
  // use by another process: host H, pid P (since T) holds <path>; ...". Other
  // errors name the path (ErrnoStatus: not writable is a config error).
  static StatusOr<DirLock> Acquire(const std::string& path, const std::string& what);

  bool held() const { return fd_.valid(); }
  const std::string& path() const { return path_; }

 private:
  void Release();
  Fd fd_;
  std::string path_;
};

}  // namespace hypertrain
