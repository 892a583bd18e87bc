#include "localcluster/apiserver/persistence.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kubelocal {
namespace {

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string DirOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

Status MakeDirs(const std::string& dir) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    size_t next = dir.find('/', pos + 1);
    cur = dir.substr(0, next);
    if (!cur.empty() && ::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) {
      return InternalError(Errno("mkdir", cur));
    }
    pos = next;
  }
  return Status();
}

Status WriteFileAtomic(const std::string& path, const std::string& data, int mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return InternalError(Errno("open", tmp));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      auto e = InternalError(Errno("write", tmp));
      ::close(fd);
      return e;
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    auto e = InternalError(Errno("fsync", tmp));
    ::close(fd);
    return e;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return InternalError(Errno("rename", tmp));
  int dfd = ::open(DirOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("files", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<std::unique_ptr<Persistence>> Persistence::Open(const std::string& dir) {
  if (Status e = MakeDirs(dir); !e.ok()) return e;
  std::unique_ptr<Persistence> p(new Persistence(dir));
  if (Status e = p->OpenLog(false); !e.ok()) return e;
  return p;
}

Persistence::~Persistence() {
  if (wal_fd_ >= 0) ::close(wal_fd_);
}

Status Persistence::OpenLog(bool truncate) {
  if (wal_fd_ >= 0) ::close(wal_fd_);
  std::string path = dir_ + "/wal.log";
  wal_fd_ = ::open(path.c_str(),
                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0600);
  if (wal_fd_ < 0) return InternalError(Errno("open", path));
  return Status();
}

StatusOr<LoadedState> Persistence::Load() {
  LoadedState st;
  auto snap = ReadFile(dir_ + "/snapshot.json");
  if (snap.ok()) {
    json j = json::parse(*snap, nullptr, false);
    if (j.is_discarded() || !j.contains("rv")) {
      return InternalError("corrupt snapshot " + dir_ + "/snapshot.json");
    }
    st.resource_version = j["rv"].get<uint64_t>();
    for (auto& [res, objs] : j["resources"].items()) {
      for (auto& [key, obj] : objs.items()) st.objects[res][key] = obj;
    }
  }
  auto wal = ReadFile(dir_ + "/wal.log");
  if (wal.ok()) {
    std::istringstream in(*wal);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      json r = json::parse(line, nullptr, false);
      if (r.is_discarded()) break;  // torn tail after a crash: stop here
      uint64_t rv = r.value("rv", uint64_t{0});
      if (rv <= st.resource_version) continue;
      const std::string res = r.value("r", "");
      const std::string key = r.value("k", "");
      if (r.value("op", "") == "put") {
        st.objects[res][key] = r["o"];
      } else {
        st.objects[res].erase(key);
      }
      st.resource_version = rv;
      ++st.wal_records;
    }
  }
  return st;
}

Status Persistence::Append(const std::string& line) {
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(wal_fd_, line.data() + off, line.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return InternalError(Errno("write", dir_ + "/wal.log"));
    }
    off += static_cast<size_t>(n);
  }
  if (::fdatasync(wal_fd_) != 0) return InternalError(Errno("fdatasync", dir_ + "/wal.log"));
  return Status();
}

Status Persistence::AppendPut(uint64_t rv, const std::string& resource, const std::string& key,
                              const json& object) {
  json r = {{"rv", rv}, {"op", "put"}, {"r", resource}, {"k", key}, {"o", object}};
  return Append(r.dump() + "\n");
}

Status Persistence::AppendDelete(uint64_t rv, const std::string& resource, const std::string& key) {
  json r = {{"rv", rv}, {"op", "del"}, {"r", resource}, {"k", key}};
  return Append(r.dump() + "\n");
}

Status Persistence::Compact(uint64_t rv, const StateMap& state) {
  json j = {{"rv", rv}, {"resources", json::object()}};
  for (const auto& [res, objs] : state) {
    json m = json::object();
    for (const auto& [key, obj] : objs) m[key] = obj;
    j["resources"][res] = std::move(m);
  }
  if (Status e = WriteFileAtomic(dir_ + "/snapshot.json", j.dump(), 0600); !e.ok()) return e;
  return OpenLog(true);
}

}  // namespace kubelocal
