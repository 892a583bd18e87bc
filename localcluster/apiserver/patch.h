// Patch application for PATCH requests.
//
// - application/merge-patch+json: RFC 7386.
// - application/json-patch+json: RFC 6902 (test/add/remove/replace/move/copy).
// - application/strategic-merge-patch+json: a subset of strategic merge patch:
//   maps merge like a merge patch; lists of objects whose elements all carry a
//   known merge key (name, containerPort, port, type, uid, mountPath, ip,
//   devicePath) merge element-wise by that key; `$patch: delete|replace`,
//   `$setElementOrder/<list>`, `$retainKeys` and `$deleteFromPrimitiveList/<list>`
//   directives are honoured; other lists are replaced.
// - application/apply-patch+yaml: the YAML (or JSON) body is converted to JSON
//   and merged like a merge patch (no field ownership tracking).
#pragma once

#include <string>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

enum class PatchType { kMerge, kJson, kStrategic, kApply };

// Maps a Content-Type to a patch type; 415 for anything else.
StatusOr<PatchType> PatchTypeFromContentType(const std::string& content_type);

// Applies `patch_body` to `target`; 400/422-style errors for bad patches.
StatusOr<json> ApplyPatch(const json& target, PatchType type, const std::string& patch_body);

// RFC 7386 merge patch.
json MergePatch(const json& target, const json& patch);
// Strategic merge patch subset described above.
StatusOr<json> StrategicMergePatch(const json& target, const json& patch);
// YAML (1.2 subset handled by yaml-cpp) or JSON text to JSON.
StatusOr<json> YamlToJson(const std::string& text);

}  // namespace kubelocal
