#include "localcluster/testing/files.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace kubelocal::testing {

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> b(tmpl.begin(), tmpl.end());
  b.push_back('\0');
  if (!mkdtemp(b.data())) throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
  return b.data();
}

std::string Runfile(const std::string& rel) {
  for (const char* env : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* base = std::getenv(env);
    if (!base) continue;
    std::string p = std::string(base) + "/hypertrain/" + rel;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

}  // namespace kubelocal::testing
