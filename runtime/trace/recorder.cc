#include "runtime/trace/recorder.h"

#include <unistd.h>

#include <fstream>

#include "core/atomic_file.h"
#include "runtime/trace/gzip.h"

namespace hypertrain::trace {

Recorder::Recorder(RecorderOptions options)
    : options_(std::move(options)), zero_(std::chrono::steady_clock::now()) {
  unix_us_at_zero_ = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  tracks_.push_back("host");  // kHostTrack
}

int Recorder::Track(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < tracks_.size(); ++i) {
    if (tracks_[i] == name) return static_cast<int>(i) + 1;
  }
  tracks_.push_back(name);
  return static_cast<int>(tracks_.size());
}

void Recorder::Start() {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++windows_;
  }
  active_.store(true, std::memory_order_relaxed);
}

void Recorder::Stop() { active_.store(false, std::memory_order_relaxed); }

bool Recorder::Admit() {
  if (static_cast<int64_t>(events_.size()) < options_.max_events) return true;
  ++dropped_;
  return false;
}

void Recorder::Complete(int track, std::string_view name, const char* cat, double begin_us,
                        double end_us, nlohmann::json args) {
  if (!active()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (!Admit()) return;
  events_.push_back({'X', track, std::string(name), cat, begin_us,
                     end_us > begin_us ? end_us - begin_us : 0.0, std::move(args)});
}

void Recorder::Instant(int track, std::string_view name, const char* cat, double ts_us,
                       nlohmann::json args) {
  if (!active()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (!Admit()) return;
  events_.push_back({'i', track, std::string(name), cat, ts_us, 0.0, std::move(args)});
}

void Recorder::Counter(std::string_view name, double ts_us, nlohmann::json values) {
  if (!active()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (!Admit()) return;
  events_.push_back({'C', 0, std::string(name), "counter", ts_us, 0.0, std::move(values)});
}

int64_t Recorder::event_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int64_t>(events_.size());
}

int64_t Recorder::dropped() const {
  std::lock_guard<std::mutex> l(mu_);
  return dropped_;
}

std::string Recorder::path() const {
  return (options_.dir.empty() ? std::string(".") : options_.dir) + "/trace-rank" +
         std::to_string(options_.rank) + ".json.gz";
}

nlohmann::json Recorder::ToJson() const {
  using nlohmann::json;
  std::lock_guard<std::mutex> l(mu_);
  const int pid = options_.rank;
  json events = json::array();
  std::string pname = "rank " + std::to_string(options_.rank) + " (node " + std::to_string(options_.node);
  if (!options_.host.empty()) pname += ", " + options_.host;
  pname += ")";
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", pname}}}});
  events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
                    {"args", {{"sort_index", options_.rank}}}});
  for (size_t i = 0; i < tracks_.size(); ++i) {
    const int tid = static_cast<int>(i) + 1;
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid},
                      {"args", {{"name", tracks_[i]}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
  }
  for (const Event& e : events_) {
    json j = {{"ph", std::string(1, e.ph)}, {"name", e.name}, {"cat", e.cat}, {"pid", pid},
              {"tid", e.tid}, {"ts", e.ts}};
    if (e.ph == 'X') j["dur"] = e.dur;
    if (e.ph == 'i') j["s"] = "t";
    if (!e.args.is_null()) j["args"] = e.args;
    events.push_back(std::move(j));
  }
  json other = {{"hypertrain",
                 {{"format", 1},
                  {"rank", options_.rank},
                  {"world_size", options_.world_size},
                  {"node", options_.node},
                  {"host", options_.host},
                  {"unix_us_at_zero", unix_us_at_zero_},
                  {"windows", windows_},
                  {"events", events_.size()},
                  {"dropped", dropped_}}}};
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", std::move(other)}};
}

StatusOr<std::string> Recorder::Write() const {
  if (!options_.dir.empty()) HT_RETURN_IF_ERROR(MakeDirs(options_.dir));
  HT_ASSIGN_OR_RETURN(std::string gz, GzipCompress(ToJson().dump()));
  const std::string p = path();
  HT_RETURN_IF_ERROR(WriteFileAtomically(p, gz));
  return p;
}

int64_t ProcessRssBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace hypertrain::trace
