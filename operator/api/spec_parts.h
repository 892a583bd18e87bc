#pragma once
// Internal to operator/api: the parts of ParseSpec that live in their own
// files (scheduling_spec.cc, pod_template.cc). Each throws parse::FieldError.

#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/api/training_job.h"

namespace hypertrain::api::parse {

// spec.scheduling (with gang and topology); `fp` for the toleration rules.
Scheduling ParseScheduling(const nlohmann::json* v, const std::string& path, const FaultPolicy& fp);
// Cross-field rules of spec.scheduling against the rest of the spec
// (instanceType, schedulerName per provider, podMetadata).
void CheckScheduling(const TrainingJobSpec& s);

// One env entry of the trainer container (reserved names rejected).
EnvVar ParseEnvVar(const nlohmann::json& e, const std::string& path);
// One volume (name rules, a source) and one trainer volume mount (must name
// one of `volumes`, must not shadow the operator's mounts).
std::string ParseVolume(const nlohmann::json& v, const std::string& path);
void ParseVolumeMount(const nlohmann::json& m, const std::string& path, const std::set<std::string>& volumes);

// spec.podTemplate, merged into `s` (labels, annotations, volumes, the trainer
// container's env, mounts and resources) or kept in s->pod_template; conflicts
// with the operator's fields or the rest of the spec are errors naming the field.
void ParsePodTemplate(const nlohmann::json* v, const std::string& path, TrainingJobSpec* s);

// spec.elastic against the rest of the spec (nodes, the scheduling timeout,
// the trainer config's batch and sharding); nullopt when absent.
std::optional<Elastic> ParseElastic(const nlohmann::json* v, const std::string& path, const TrainingJobSpec& s);

// The launcher's metrics port the env sets (contract/env.h kMetricsPort,
// default 9400), 0 when turned off.
int MetricsPortOf(const std::vector<EnvVar>& env);

// Pod labels and annotations the operator sets itself (a user may not).
bool IsOperatorLabel(const std::string& key);
bool IsOperatorAnnotation(const std::string& key);

}  // namespace hypertrain::api::parse
