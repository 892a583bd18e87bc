#pragma once
// What a TrainingJob pod looks like to both sides: the labels the operator
// puts on it, the progress annotation the launcher writes, and where the trainer
// finds its config inside the container.

namespace hypertrain::contract {

// Labels on every pod the operator creates (users select with them, e.g.
// `kubectl get pods -l hypertrain.dev/job-name=<job>`).
// The TrainingJob's name; the pod reads it back through the downward API as
// HYPERTRAIN_JOB_NAME (env.h), so the label and the variable never disagree.
inline constexpr char kLabelJobName[] = "hypertrain.dev/job-name";
// The pod's node rank (the same value as NODE_RANK).
inline constexpr char kLabelNodeRank[] = "hypertrain.dev/node-rank";
// The gang's restart attempt (the same value as RESTART_ATTEMPT).
inline constexpr char kLabelRestartAttempt[] = "hypertrain.dev/restart-attempt";

// Annotation `hypertrain launch` on node rank 0 writes with the job's progress
// (format: progress.h) on the job's progress ConfigMap (env
// HYPERTRAIN_PROGRESS_CONFIGMAP), not on a pod: the pods may patch that one
// object only. The operator copies it to status.progress and uses it for hang
// detection.
inline constexpr char kAnnotationProgress[] = "hypertrain.dev/progress";

// Annotation a user puts on a TrainingJob to trace some steps of its next
// attempt (format: profile.h), e.g.
//   kubectl annotate tj llama hypertrain.dev/profile=start_step=1200,num_steps=3
// The operator passes it to the pods it creates from then on as
// HYPERTRAIN_PROFILE (env.h); pods already running are not touched.
inline constexpr char kAnnotationProfile[] = "hypertrain.dev/profile";

// The trainer config inside the container: the operator mounts the job's
// ConfigMap (read-only) at kConfigMountDir and passes kConfigPath as
// HYPERTRAIN_CONFIG.
inline constexpr char kConfigMountDir[] = "/etc/hypertrain";
inline constexpr char kConfigFileName[] = "config.yaml";
inline constexpr char kConfigPath[] = "/etc/hypertrain/config.yaml";

}  // namespace hypertrain::contract
