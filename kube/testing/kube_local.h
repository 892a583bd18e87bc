#pragma once
// Deprecated path, kept while operator tests include it: the kube-local
// fixture is localcluster/testing/kube_local.h (files.h for the helpers).
#include "localcluster/testing/files.h"
#include "localcluster/testing/kube_local.h"

namespace kube::testing {
using kubelocal::testing::KubeLocal;
using kubelocal::testing::MakeTempDir;
using kubelocal::testing::Runfile;
}  // namespace kube::testing
