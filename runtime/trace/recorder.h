#pragma once
// Recorder: one rank's timeline in the Chrome / Perfetto trace event format
// (the JSON object form: {"traceEvents": [...], "otherData": {...}}),
// written gzip-compressed to <dir>/trace-rank<R>.json.gz. Open it in
// https://ui.perfetto.dev or chrome://tracing; `hypertrain trace merge`
// puts every rank's file on one timeline (runtime/trace/merge.h).
//
// Layout of a file: process = the rank (pid = rank, named "rank R (node N,
// host H)"); tracks = Chrome "threads" of that process, created by name
// (Track): "host" (the training loop's phases), "gloo world" / "nccl shard0"
// (one per process group: each collective with its bytes), "cuda compute
// stream" (device work from CUDA events), ...; counters ("C" events) such as
// memory.
//
// Zero cost when off: a component holds a Recorder* that is null unless
// profiling was configured, and Span checks it (one branch, no clock read).
// When configured but outside the window (Start/Stop), calls are one relaxed
// atomic load. Inside the window every event takes a mutex and an append.
//
// Clock: steady_clock, microseconds (fractional, ns resolution) since the
// recorder was created; the file records the wall-clock time of that zero
// ("unix_us_at_zero") so files of ranks on different hosts can be aligned.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hypertrain::trace {

struct RecorderOptions {
  int rank = 0;
  int world_size = 1;
  int node = 0;
  std::string host;           // shown in the process name
  std::string dir;            // where Write() puts the file
  int64_t max_events = 4'000'000;  // past this, events are counted as dropped
};

class Recorder {
 public:
  explicit Recorder(RecorderOptions options);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // The training loop's track (always tid 1, created first).
  static constexpr int kHostTrack = 1;

  // The id of the track called `name`, created on first use (thread-safe).
  int Track(const std::string& name);

  // The recording window. Outside it every event is ignored.
  void Start();
  void Stop();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Microseconds since this recorder's zero.
  double NowUs() const { return ToUs(std::chrono::steady_clock::now()); }
  double ToUs(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - zero_).count();
  }

  // A span [begin_us, end_us] on `track` ("X" event); `cat` groups events in
  // the UI ("host", "collective", "device", ...). args: a JSON object or null.
  void Complete(int track, std::string_view name, const char* cat, double begin_us, double end_us,
                nlohmann::json args = nullptr);
  // A point in time ("i" event, thread scope).
  void Instant(int track, std::string_view name, const char* cat, double ts_us,
               nlohmann::json args = nullptr);
  // Counter values at ts ("C" event): `values` maps series name -> number.
  void Counter(std::string_view name, double ts_us, nlohmann::json values);

  int64_t event_count() const;
  int64_t dropped() const;
  const RecorderOptions& options() const { return options_; }
  // <dir>/trace-rank<R>.json.gz
  std::string path() const;

  // The whole document (metadata, events so far).
  nlohmann::json ToJson() const;
  // Writes ToJson() gzip-compressed to path(), atomically (a reader never
  // sees half a file); creates dir. Returns the path.
  StatusOr<std::string> Write() const;

 private:
  struct Event {
    char ph;
    int tid;
    std::string name;
    const char* cat;
    double ts, dur;
    nlohmann::json args;
  };
  bool Admit();  // under mu_: room left?

  RecorderOptions options_;
  std::chrono::steady_clock::time_point zero_;
  int64_t unix_us_at_zero_ = 0;
  std::atomic<bool> active_{false};
  mutable std::mutex mu_;
  std::vector<std::string> tracks_;  // tid - 1 -> name
  std::vector<Event> events_;
  int64_t dropped_ = 0;
  int windows_ = 0;
};

// RAII span on a track; does nothing when the recorder is null or inactive
// at construction. Arg() adds to the event's args.
class Span {
 public:
  Span(Recorder* r, int track, const char* name, const char* cat = "host")
      : r_(r != nullptr && r->active() ? r : nullptr), track_(track), name_(name), cat_(cat) {
    if (r_ != nullptr) begin_ = r_->NowUs();
  }
  ~Span() {
    if (r_ != nullptr) r_->Complete(track_, name_, cat_, begin_, r_->NowUs(), std::move(args_));
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  template <typename T>
  void Arg(const char* key, T&& value) {
    if (r_ != nullptr) args_[key] = std::forward<T>(value);
  }
  bool on() const { return r_ != nullptr; }

 private:
  Recorder* r_;
  int track_;
  const char* name_;
  const char* cat_;
  double begin_ = 0;
  nlohmann::json args_;
};

// Resident set size of this process (VmRSS), bytes; 0 when unknown.
int64_t ProcessRssBytes();

}  // namespace hypertrain::trace
