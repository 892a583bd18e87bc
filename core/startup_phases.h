#pragma once
// Start-up phases of one process, each with its duration: where the seconds
// between `exec` and the first training step go (issue 34). One small timer
// used at every site, so every phase is measured the same way and lands in one
// record, which the trainer logs as a "time to first step" line and writes to
// metrics.jsonl.
//
//   startup::PhaseTimer t("weight_init");   // ... work ...; recorded on End()
//                                           // or destruction
//
// Phases nest: a timer started while another is open on the same thread is
// recorded as "outer/inner" (e.g. "backend/weight_init"), so the top-level
// phases never overlap and add up to the time to first step (the rest is
// "other"). Thread-safe; the record is process-wide because the sites are
// layers apart (config, rendezvous, backend, kernels) and the start-up happens
// once per process.
#include <string>
#include <vector>

namespace hypertrain::startup {

struct PhaseRecord {
  std::string name;  // "rendezvous", "backend/weight_init"
  double seconds = 0;
  int depth = 0;  // 0: top level
};

// Seconds since this process was exec'd (its start time in /proc/self/stat
// against CLOCK_BOOTTIME, 10 ms resolution); without /proc, since the first
// call into this library.
double SecondsSinceExec();

class PhaseTimer {
 public:
  explicit PhaseTimer(std::string name);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  // Records the phase (once) and returns its seconds.
  double End();

 private:
  std::string name_;  // full name, parents included
  int depth_;
  double begin_;
  bool ended_ = false;
};

// Records a phase measured otherwise (e.g. "process_start": exec to main).
void Record(const std::string& name, double seconds, int depth = 0);

// Adds `seconds` to the phase `name` nested in this thread's innermost open
// phase ("first_step/gemm_autotune"), made on first use: for work spread over
// many calls (each GEMM shape's tuning). Logged at debug only.
void Accumulate(const std::string& name, double seconds);

// Phases recorded so far, in the order they ended.
std::vector<PhaseRecord> Phases();

// Whether each phase is logged at info (the logging rank) or debug (default).
void SetVerbose(bool verbose);

// The summary after the first step: total seconds since exec and the
// top-level phases in the order they ended, each with its direct children in
// parentheses, plus "other" (what no phase covered). The line: "time to first
// step 12.34 s: process_start 0.05, config 0.01, backend 9.10 (cuda_init
// 0.40, weight_init 0.02, activation_plan 1.10), ..., other 0.02".
struct Summary {
  double time_to_first_step_s = 0;
  std::vector<PhaseRecord> phases;  // every phase, nested ones included
  double other_s = 0;
};
Summary Summarize(double time_to_first_step_s);
std::string FormatSummary(const Summary& s);

// For tests: forget every phase recorded.
void ResetForTest();

}  // namespace hypertrain::startup
