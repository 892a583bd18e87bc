#pragma once
// What the operator's informer caches keep of each object (controller-runtime's
// cache TransformFunc and metadata-only informers): the fields the reconciler
// reads, nothing more. A trainer pod as created carries its whole spec (env,
// volumes, affinity, probes: tens of kilobytes as a JSON tree); the cache keeps
// its metadata, node and status, so a 2048-node job costs a few MiB, not 200.
// Each function trims in place and keeps metadata.name, namespace, uid,
// resourceVersion, labels, annotations, ownerReferences, finalizers and
// deletionTimestamp (the store's keys and indexes, the ownership checks).

#include "kube/resources.h"

namespace hypertrain::controller {

// Pods: metadata, spec.nodeName and spec.schedulingGates, the whole status
// (everything PodFromJson reads).
void TrimPod(kube::Json& pod);

// Nodes: metadata.name, uid, resourceVersion, labels; spec.unschedulable and
// spec.taints; status.allocatable and status.conditions without their
// heartbeat times (everything NodeFromJson and the node-change filter read;
// a heartbeat alone then changes nothing the operator looks at).
void TrimNode(kube::Json& node);

// The objects the operator only needs to know exist and who owns them (its
// Services, ServiceAccounts, Roles, RoleBindings): apiVersion, kind, metadata.
void KeepMetadataOnly(kube::Json& obj);

}  // namespace hypertrain::controller
