#include "core/fd.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hypertrain {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status Fd::Close(const std::string& path_for_errors) {
  if (fd_ < 0) return Status::Ok();
  if (::close(release()) != 0)
    return IoError("close " + path_for_errors + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace hypertrain
