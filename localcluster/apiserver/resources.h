// The resource types the control plane serves: built-in core/v1,
// coordination.k8s.io/v1 and apiextensions.k8s.io/v1 types, plus every
// version of every CustomResourceDefinition. Produces the discovery documents.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

struct PrinterColumn {
  std::string name, type, format, description, json_path;
  int priority = 0;
};

struct ResourceType {
  std::string group, version, plural, singular, kind;
  bool namespaced = true;
  std::vector<std::string> short_names, categories;
  bool has_status = false;  // status subresource
  bool is_crd = false;
  std::string crd_name;          // for CRs: the owning CRD
  json schema;                   // openAPIV3Schema of this version (CRs), null otherwise
  std::vector<PrinterColumn> columns;  // CRD additionalPrinterColumns
  std::vector<std::string> field_selectors;  // besides metadata.name/namespace

  std::string storage_key() const { return group + "/" + plural; }
  // "pods" or "trainingjobs.example.com", as used in error messages.
  std::string qualified() const { return group.empty() ? plural : plural + "." + group; }
  // "Pod" or "TrainingJob.example.com", as used in Invalid messages.
  std::string kind_group() const { return group.empty() ? kind : kind + "." + group; }
  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
};

class Registry {
 public:
  Registry();

  std::optional<ResourceType> Find(const std::string& group, const std::string& version,
                                   const std::string& plural) const;
  // Served type for a kind (used for ownerReferences / events).
  std::vector<ResourceType> All() const;

  // Validates a CRD object and returns the types it defines (one per served
  // version) or a 422 Invalid error.
  static StatusOr<std::vector<ResourceType>> TypesFromCrd(const json& crd);
  // Installs (replacing) the types of CRD `crd_name`. Conflicts with another
  // CRD's or a built-in's names are rejected by the caller's validation.
  void SetCrd(const std::string& crd_name, std::vector<ResourceType> types);
  void RemoveCrd(const std::string& crd_name);

  // Discovery documents.
  json ApiVersions(const std::string& server_address) const;
  json ApiGroupList() const;
  std::optional<json> ApiGroup(const std::string& group) const;
  std::optional<json> ApiResourceList(const std::string& group, const std::string& version) const;

 private:
  void Add(ResourceType t);
  mutable std::shared_mutex mu_;
  std::vector<ResourceType> builtins_;
  std::map<std::string, std::vector<ResourceType>> crds_;
};

}  // namespace kubelocal
