#include "runtime/cmd/preflight.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "contract/env.h"
#include "core/atomic_file.h"

namespace hypertrain::cmd {

ExpDirGuard::~ExpDirGuard() {
  lock_ = DirLock();  // removes the lock file
  if (!created_.empty()) ::rmdir(created_.c_str());  // only when empty
}

Status CheckWritableDir(const std::string& key, const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(fs::path(path)).lexically_normal();
  while (true) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return InvalidArgument(fmt::format("{}: {}: {} is not a directory", key, path, p.string()));
      }
      if (::access(p.c_str(), W_OK | X_OK) != 0) {
        return InvalidArgument(fmt::format("{}: {}: {} is not writable ({}); fix the path or its permissions", key,
                                           path, p.string(), std::strerror(errno)));
      }
      return Status::Ok();
    }
    if (errno == ENOTDIR) {
      return InvalidArgument(fmt::format("{}: {}: a part of it is a file, not a directory", key, path));
    }
    if (!p.has_parent_path() || p.parent_path() == p) return Status::Ok();
    p = p.parent_path();
  }
}

StatusOr<ExpDirGuard> Preflight(const config::TrainConfig& c, const launch::EnvLookup& env) {
  const config::CheckpointConfig& k = c.checkpoint;
  if (!k.export_hf_dir.empty()) {
    HT_RETURN_IF_ERROR(CheckWritableDir("exp_manager.checkpoint.export_hf_dir", k.export_hf_dir));
  }
  if (c.profile.enabled() && !c.profile.dir.empty()) {
    HT_RETURN_IF_ERROR(CheckWritableDir("trainer.profile.dir", c.profile.dir));
  }
  ExpDirGuard guard;
  const char* rank = env(contract::env::kRank);
  if (rank != nullptr && *rank != '\0' && std::strcmp(rank, "0") != 0) return guard;
  std::error_code ec;
  const bool existed = std::filesystem::exists(c.exp_dir, ec);
  if (Status s = MakeDirs(c.exp_dir); !s.ok()) {
    return Status(s.code(), "exp_manager.exp_dir: " + s.message());
  }
  if (!existed) guard.created_ = c.exp_dir;
  HT_ASSIGN_OR_RETURN(guard.lock_,
                      DirLock::Acquire(c.exp_dir + "/.hypertrain.lock", "exp_manager.exp_dir " + c.exp_dir));
  return guard;
}

}  // namespace hypertrain::cmd
