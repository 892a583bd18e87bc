#include "operator/cmd/permissions.h"

namespace hypertrain::operatorcmd {

const std::vector<Permission>& OperatorPermissions() {
  using S = PermissionScope;
  static const std::vector<Permission> k = {
      {"hypertrain.dev", "trainingjobs", {"get", "list", "watch", "delete"}, S::kWatchedNamespaces, {},
       "informer; a fresh GET before creating pods; deletion after ttlSecondsAfterFinished"},
      {"hypertrain.dev", "trainingjobs/status", {"update"}, S::kWatchedNamespaces, {}, "status writes"},
      {"hypertrain.dev", "trainingjobs/finalizers", {"update"}, S::kWatchedNamespaces, {"update"},
       "owner references with blockOwnerDeletion, where OwnerReferencesPermissionEnforcement is on"},
      {"", "pods", {"create", "delete", "list", "watch", "patch"}, S::kWatchedNamespaces, {},
       "the gang: informer, creation, deletion on restart, suspend and cleanPodPolicy; patch only under Kueue "
       "(kueue.x-k8s.io/retriable-in-group on one terminated pod of a failed job)"},
      {"", "services", {"create", "list", "watch"}, S::kWatchedNamespaces, {},
       "the headless Service; a metadata-only informer (labelled ones), so that an existing one is neither created "
       "again nor used when not the job's; read back by name after a 409"},
      {"", "configmaps", {"create", "list", "watch", "patch"}, S::kWatchedNamespaces, {"patch"},
       "the inline config and the progress ConfigMap; patch so that the trainer's progress Role may grant it, and "
       "called only to give a progress ConfigMap the trainer's token stripped its ownerReference, labels and no "
       "finalizers back"},
      {"", "events", {"create"}, S::kWatchedNamespaces, {}, "Events on the TrainingJob"},
      {"", "serviceaccounts", {"create", "list", "watch"}, S::kWatchedNamespaces, {},
       "the job's trainer ServiceAccount (informer: as for services)"},
      {"rbac.authorization.k8s.io", "roles", {"create", "list", "watch"}, S::kWatchedNamespaces, {},
       "the job's progress Role (informer: as for services)"},
      {"rbac.authorization.k8s.io", "rolebindings", {"create", "list", "watch"}, S::kWatchedNamespaces, {},
       "the progress Role to the trainer's ServiceAccount (informer: as for services)"},
      {"scheduling.x-k8s.io", "podgroups", {"create"}, S::kWatchedNamespaces, {},
       "the gang's PodGroup under scheduler-plugins coscheduling", "gangScheduling.coscheduling"},
      {"scheduling.volcano.sh", "podgroups", {"create"}, S::kWatchedNamespaces, {}, "the gang's PodGroup under Volcano",
       "gangScheduling.volcano"},
      {"", "nodes", {"list", "watch"}, S::kCluster, {}, "node health (read-only informer)"},
      {"coordination.k8s.io", "leases", {"get", "create", "update"}, S::kReleaseNamespace, {}, "leader election"},
  };
  return k;
}

}  // namespace hypertrain::operatorcmd
