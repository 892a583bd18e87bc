#pragma once
// The Kubernetes permissions the operator's code uses, one entry per resource:
// what the Helm chart grants (//charts:helm_chart_test compares its rendered
// rules with this list, exactly) and what the operator really calls against a
// real API server (tests/e2e/realkube_test.sh compares the API server's audit
// log with the installed roles). A call added to the code without an entry
// here fails with 403 there; an entry no call uses fails the audit comparison.

#include <string>
#include <vector>

namespace hypertrain::operatorcmd {

enum class PermissionScope {
  kWatchedNamespaces,  // a Role per watched namespace, or one ClusterRole for all
  kCluster,            // cluster-scoped objects (ClusterRole)
  kReleaseNamespace,   // the operator's own namespace (leader election)
};

struct Permission {
  std::string group;     // "" for the core group
  std::string resource;  // "pods", "trainingjobs/status", ...
  std::vector<std::string> verbs;
  PermissionScope scope;
  // Verbs held but never sent, and why (the API server checks them on the
  // operator's behalf): they are not in the audit log.
  std::vector<std::string> held_not_called;
  std::string why;
  // The chart value that grants this entry ("" for always): the gang
  // schedulers' PodGroups are granted only where their provider is turned on
  // (gangScheduling.coscheduling / gangScheduling.volcano).
  std::string chart_switch = "";
};

const std::vector<Permission>& OperatorPermissions();

}  // namespace hypertrain::operatorcmd
