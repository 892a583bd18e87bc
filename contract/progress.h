#pragma once
// The progress annotation (kAnnotationProgress, pod.h): node 0's launcher
// encodes, the operator decodes. The value is a JSON object, readable with
// `kubectl get pod -o jsonpath`:
//
//   {"step": 120, "maxSteps": 1000, "loss": 2.31, "tokensPerSecond": 51000.0,
//    "lastCheckpointStep": 100, "time": "2026-11-22T01:02:03Z", "attempt": 1,
//    "startup": {"timeToFirstStepSeconds": 12.3,
//                "phases": [{"name": "backend", "seconds": 9.1}, ...]}}
//
// "step" (a non-negative integer) is required; every other field is optional,
// and decoding ignores fields it does not know (a newer launcher may add some).
//
// This library is the contract's one dependency beyond the standard library:
// nlohmann/json, header-only. The format was JSON before the contract existed
// (deployed launchers write it, users read it), and both sides already link
// the same header; a hand-written JSON reader here would be a second parser of
// the same format to keep correct.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypertrain::contract {

// Start-up of the attempt's trainer (node 0's rank 0): seconds from its exec
// to the end of its first step, and the top-level phases in order (the
// "startup" key of its first metrics.jsonl record; core/startup_phases.h).
struct StartupReport {
  struct Phase {
    std::string name;
    double seconds = 0;
    bool operator==(const Phase&) const = default;
  };
  double time_to_first_step_seconds = 0;
  std::vector<Phase> phases;
  bool operator==(const StartupReport&) const = default;
};

// The recovery section: present once the first step after a resume from a
// checkpoint finished (node 0's trainer writes it to metrics.jsonl, its
// launcher adds its own start). The operator measures the recovery from the
// fault to `first_step_time` with it (status.lastRecoverySeconds):
//
//   "recovery": {"resumedFromStep": 100, "firstStepTime": "2026-11-22T01:02:03.456Z",
//                "launcherStart": "...", "rendezvousSeconds": 1.2,
//                "checkpointLoadSeconds": 8.0, "checkpointLoadGBps": 3.0,
//                "firstStepSeconds": 2.5, "trainerSeconds": 14.1}
//
// trainerSeconds: the trainer's start (assembly) to the end of that first
// step; the three phases are parts of it. Only resumedFromStep and
// firstStepTime are required.
struct Recovery {
  int64_t resumed_from_step = 0;
  std::string first_step_time;  // RFC 3339 (fractional seconds)
  std::string launcher_start;   // RFC 3339: node 0's launcher started ("" = unknown)
  std::optional<double> rendezvous_seconds;  // rendezvous and process groups
  std::optional<double> checkpoint_load_seconds;
  std::optional<double> checkpoint_load_gbps;  // node 0's rank 0: its shard's bytes / load time
  std::optional<double> first_step_seconds;
  std::optional<double> trainer_seconds;

  bool operator==(const Recovery&) const = default;
};

struct Progress {
  int64_t step = -1;  // -1: no step seen yet (EncodeProgress requires >= 0)
  std::optional<int64_t> max_steps;
  std::optional<double> loss;
  std::optional<double> tokens_per_second;
  std::optional<int64_t> last_checkpoint_step;
  std::string time;  // RFC 3339 of publication; "" = absent
  // The restart attempt of the pods that published it (RESTART_ATTEMPT): the
  // job's progress ConfigMap outlives the attempts, so the operator ignores a
  // report of an earlier one. Absent from older launchers.
  std::optional<int64_t> attempt;
  // Absent until the attempt's first step (and from older launchers).
  std::optional<StartupReport> startup;
  // Set by a trainer that resumed from a checkpoint (see Recovery).
  std::optional<Recovery> recovery;

  bool operator==(const Progress&) const = default;
};

// The annotation value for `p` (p.step >= 0); absent fields are left out.
std::string EncodeProgress(const Progress& p);

// The "recovery" object alone (also the trainer's metrics.jsonl record);
// nullopt when `j` lacks resumedFromStep or firstStepTime.
std::string EncodeRecovery(const Recovery& r);
std::optional<Recovery> DecodeRecovery(std::string_view json_object);

// Parses an annotation value. nullopt with *error set (e.g. "not a JSON
// object", "step must be a non-negative integer") when it is malformed.
std::optional<Progress> DecodeProgress(std::string_view value, std::string* error);

}  // namespace hypertrain::contract
