// Test helpers for files: a fresh temporary directory and runfile paths.
#pragma once

#include <string>

namespace kubelocal::testing {

// A new directory under $TEST_TMPDIR (or /tmp) named <prefix>XXXXXX; throws
// std::runtime_error when it cannot be made.
std::string MakeTempDir(const std::string& prefix);
// Absolute path of an executable runfile of the hypertrain workspace, e.g.
// "localcluster/apiserver/kube-local"; "" if there is none.
std::string Runfile(const std::string& workspace_relative);

}  // namespace kubelocal::testing
