#include "localcluster/apiserver/persistence.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "core/atomic_file.h"

namespace kubelocal {

using hypertrain::ErrnoStatus;

StatusOr<std::unique_ptr<Persistence>> Persistence::Open(const std::string& dir) {
  if (Status e = hypertrain::MakeDirs(dir, 0700); !e.ok()) return e;
  std::unique_ptr<Persistence> p(new Persistence(dir));
  if (Status e = p->OpenLog(false); !e.ok()) return e;
  return p;
}

Persistence::~Persistence() = default;

Status Persistence::OpenLog(bool truncate) {
  const std::string path = dir_ + "/wal.log";
  wal_ = hypertrain::Fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0600));
  if (!wal_.valid()) return ErrnoStatus("open", path, errno);
  return Status();
}

StatusOr<LoadedState> Persistence::Load() {
  LoadedState st;
  auto snap = hypertrain::ReadFileToString(dir_ + "/snapshot.json");
  if (!snap.ok() && snap.status().code() != hypertrain::StatusCode::kNotFound) return snap.status();
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
  auto wal = hypertrain::ReadFileToString(dir_ + "/wal.log");
  if (!wal.ok() && wal.status().code() != hypertrain::StatusCode::kNotFound) return wal.status();
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
    ssize_t n = ::write(wal_.get(), line.data() + off, line.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", dir_ + "/wal.log", errno);
    }
    off += static_cast<size_t>(n);
  }
  if (::fdatasync(wal_.get()) != 0) return ErrnoStatus("fdatasync", dir_ + "/wal.log", errno);
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
  if (Status e = hypertrain::WriteFileAtomically(dir_ + "/snapshot.json", j.dump(), 0600); !e.ok()) return e;
  return OpenLog(true);
}

}  // namespace kubelocal
