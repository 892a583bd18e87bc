#pragma once
// RAII file descriptor (files, sockets, pipes): closed exactly once, by its
// owner. The one Fd of the code base.
#include <string>

#include "core/status.h"

namespace hypertrain {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release();
  // Closes now (errors ignored, as in the destructor).
  void reset();
  // close(2) with its error reported (a deferred write error can surface
  // here): IoError "close <path_for_errors>: <strerror>".
  Status Close(const std::string& path_for_errors);

 private:
  int fd_ = -1;
};

}  // namespace hypertrain
