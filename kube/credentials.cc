#include "kube/credentials.h"

#include <sys/stat.h>

#include "core/atomic_file.h"
#include "kube/exec_credential.h"

namespace kube {

Credentials::Credentials(const Config& c)
    : server_(c.server), static_token_(c.token), token_file_(c.token_file), exec_(c.exec) {}

StatusOr<std::string> Credentials::FileToken() {
  // Stat on each call (cheap) and re-read on change: kubelet rotates the
  // projected token by an atomic symlink swap, which changes mtime.
  struct stat st {};
  if (stat(token_file_.c_str(), &st) != 0) {
    if (!file_token_.empty()) return file_token_;  // keep the last good token
    return hypertrain::Unauthenticated("cannot stat token file " + token_file_);
  }
  if (file_token_.empty() || st.st_mtim.tv_sec != file_mtime_.tv_sec ||
      st.st_mtim.tv_nsec != file_mtime_.tv_nsec || st.st_size != file_size_) {
    auto t = hypertrain::ReadFileToString(token_file_);
    if (!t.ok()) {
      if (!file_token_.empty()) return file_token_;
      return hypertrain::Unauthenticated("cannot read token file " + token_file_);
    }
    std::string tok = *t;
    while (!tok.empty() && (tok.back() == '\n' || tok.back() == '\r' || tok.back() == ' '))
      tok.pop_back();
    if (tok.empty()) return hypertrain::Unauthenticated("token file " + token_file_ + " is empty");
    file_token_ = tok;
    file_mtime_ = st.st_mtim;
    file_size_ = st.st_size;
  }
  return file_token_;
}

StatusOr<std::string> Credentials::ExecToken() {
  auto now = std::chrono::system_clock::now();
  // Refresh a little before expiry so an in-flight request does not carry a dead token.
  if (!exec_token_.empty() && (!exec_expiry_ || *exec_expiry_ - std::chrono::seconds(10) > now))
    return exec_token_;
  exec_runs_.fetch_add(1);
  auto cred = RunExecPlugin(*exec_, server_);
  if (!cred.ok()) return cred.status();
  exec_token_ = cred->token;
  exec_expiry_ = cred->expiration;
  return exec_token_;
}

StatusOr<std::string> Credentials::AuthorizationHeader() {
  std::lock_guard<std::mutex> l(mu_);
  StatusOr<std::string> tok = std::string();
  if (exec_) {
    tok = ExecToken();
  } else if (!token_file_.empty()) {
    tok = FileToken();
  } else {
    tok = static_token_;
  }
  if (!tok.ok()) return tok.status();
  if (tok->empty()) return std::string();
  return "Bearer " + *tok;
}

bool Credentials::OnUnauthorized() {
  std::lock_guard<std::mutex> l(mu_);
  if (exec_) {
    exec_token_.clear();
    exec_expiry_.reset();
    return true;
  }
  if (!token_file_.empty()) {
    file_size_ = -1;  // force a re-read
    return true;
  }
  return false;
}

}  // namespace kube
