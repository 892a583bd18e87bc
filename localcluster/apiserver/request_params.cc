#include "localcluster/apiserver/request_params.h"

#include <vector>

#include "localcluster/apiserver/selectors.h"

namespace kubelocal {

bool Truthy(const std::string& v) { return v == "1" || v == "true" || v == "True"; }

IncludeObject IncludeFrom(const HttpRequest& req) {
  std::string v = req.Query("includeObject");
  if (v == "None") return IncludeObject::kNone;
  if (v == "Object") return IncludeObject::kObject;
  return IncludeObject::kMetadata;
}

StatusOr<ObjectPredicate> SelectorPredicate(const HttpRequest& req, const ResourceType& type) {
  auto ls = LabelSelector::Parse(req.Query("labelSelector"));
  if (!ls.ok()) return ls.status();
  auto fs = FieldSelector::Parse(req.Query("fieldSelector"));
  if (!fs.ok()) return fs.status();
  std::vector<std::string> allowed = {"metadata.name", "metadata.namespace"};
  allowed.insert(allowed.end(), type.field_selectors.begin(), type.field_selectors.end());
  if (Status e = fs->CheckAllowed(allowed, type.kind); !e.ok()) return e;
  LabelSelector l = *ls;
  FieldSelector f = *fs;
  return ObjectPredicate([l, f](const json& o) { return l.Matches(o) && f.Matches(o); });
}

}  // namespace kubelocal
