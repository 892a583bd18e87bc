#pragma once
// The version every binary prints for --version: `git describe --tags
// --always --dirty` of the source tree, baked in at build time through
// Bazel's workspace status (tools/workspace_status.sh, .bazelrc); "unknown"
// when the tree had no git metadata and HYPERTRAIN_VERSION was not set.
#include <string>

namespace hypertrain {

const std::string& Version();

}  // namespace hypertrain
