// Request parameters that several API verbs read the same way: booleans,
// label/field selectors and includeObject (Tables).
#pragma once

#include <string>

#include "localcluster/apiserver/api_error.h"
#include "localcluster/apiserver/http_types.h"
#include "localcluster/apiserver/resources.h"
#include "localcluster/apiserver/table.h"
#include "localcluster/apiserver/watch_hub.h"

namespace kubelocal {

// "1", "true" or "True".
bool Truthy(const std::string& v);
// The includeObject parameter of a Table request (default Metadata).
IncludeObject IncludeFrom(const HttpRequest& req);
// The predicate of a list or watch from labelSelector and fieldSelector (the
// fields `type` supports, besides metadata.name and metadata.namespace).
StatusOr<ObjectPredicate> SelectorPredicate(const HttpRequest& req, const ResourceType& type);

}  // namespace kubelocal
