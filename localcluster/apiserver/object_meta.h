// Object metadata helpers shared by object semantics (object_ops.h) and
// admission (admission.h): names, uids, timestamps, spec changes. Both build
// on this; neither includes the other's header for them.
#pragma once

#include <cstdint>
#include <string>

#include "localcluster/apiserver/resources.h"

namespace kubelocal {

// metadata.<field> of an object when it is a string, else "".
std::string MetaStr(const json& o, const char* field);

bool IsDnsSubdomain(const std::string& s);
bool IsDnsLabel(const std::string& s);
std::string NowRfc3339(int64_t offset_seconds = 0);
std::string NewUid();
// Everything but metadata and status differs (drives metadata.generation).
bool SpecChanged(const json& a, const json& b);

}  // namespace kubelocal
