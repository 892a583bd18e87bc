#pragma once
// Deprecated path, kept while operator tests include it for MakeTempDir: there
// is no fake API server any more. Tests use the real one
// (localcluster/testing/kube_local.h) or, for answers it will not give, the
// scripted peer (localcluster/testing/scripted_server.h).
#include "kube/testing/kube_local.h"
