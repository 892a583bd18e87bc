// Decoding of the Kubernetes protobuf wire format for the few request bodies
// kubectl sends as protobuf (`kubectl create namespace|configmap|secret|
// serviceaccount` use typed clients with application/vnd.kubernetes.protobuf).
// Envelope: "k8s\0" + runtime.Unknown{typeMeta, raw}. Only the fields of those
// kinds (and the common ObjectMeta fields) are decoded; anything else is 415.
#pragma once

#include <string>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

StatusOr<json> DecodeKubernetesProtobuf(const std::string& body);

}  // namespace kubelocal
