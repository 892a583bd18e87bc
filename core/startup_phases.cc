#include "core/startup_phases.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>

namespace hypertrain::startup {
namespace {

struct State {
  std::mutex mu;
  std::vector<PhaseRecord> phases;
};

State& Global() {
  static State* s = new State();  // never destroyed: timers may end during exit
  return *s;
}

std::atomic<bool> g_verbose{false};
thread_local std::vector<std::string> t_open;  // names of this thread's open phases

// Seconds from exec to `now_boot` read from /proc/self/stat (field 22,
// starttime in clock ticks since boot); negative when unavailable.
double ExecAgeFromProc() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  // The command name (field 2) is in parentheses and may hold spaces.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> f; ++i) {
    if (i == 22) start_ticks = std::stoull(f);
  }
  const long hz = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (start_ticks == 0 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1;
  const double age = now.tv_sec + now.tv_nsec * 1e-9 - static_cast<double>(start_ticks) / hz;
  return age >= 0 ? age : -1;
}

// The steady-clock instant of exec, fixed on first use.
std::chrono::steady_clock::time_point ExecInstant() {
  static const std::chrono::steady_clock::time_point exec = [] {
    const auto now = std::chrono::steady_clock::now();
    const double age = ExecAgeFromProc();
    return age < 0 ? now
                   : now - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(age));
  }();
  return exec;
}

}  // namespace

double SecondsSinceExec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - ExecInstant()).count();
}

PhaseTimer::PhaseTimer(std::string name) : depth_(static_cast<int>(t_open.size())) {
  name_ = t_open.empty() ? std::move(name) : t_open.back() + "/" + name;
  t_open.push_back(name_);
  begin_ = SecondsSinceExec();
}

PhaseTimer::~PhaseTimer() { End(); }

double PhaseTimer::End() {
  const double s = SecondsSinceExec() - begin_;
  if (ended_) return s;
  ended_ = true;
  // Timers end in reverse order of their start on one thread; remove ours
  // wherever it is, so an out-of-order End never corrupts the stack.
  for (auto it = t_open.rbegin(); it != t_open.rend(); ++it) {
    if (*it == name_) {
      t_open.erase(std::next(it).base());
      break;
    }
  }
  Record(name_, s, depth_);
  return s;
}

void Record(const std::string& name, double seconds, int depth) {
  {
    State& g = Global();
    std::lock_guard<std::mutex> lock(g.mu);
    g.phases.push_back({name, seconds, depth});
  }
  spdlog::log(g_verbose.load() ? spdlog::level::info : spdlog::level::debug, "start-up: {} {:.3f} s",
              name, seconds);
}

void Accumulate(const std::string& name, double seconds) {
  const std::string full = t_open.empty() ? name : t_open.back() + "/" + name;
  const int depth = static_cast<int>(t_open.size());
  {
    State& g = Global();
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = std::find_if(g.phases.begin(), g.phases.end(),
                           [&](const PhaseRecord& p) { return p.name == full; });
    if (it != g.phases.end()) {
      it->seconds += seconds;
    } else {
      g.phases.push_back({full, seconds, depth});
    }
  }
  spdlog::debug("start-up: {} +{:.3f} s", full, seconds);
}

std::vector<PhaseRecord> Phases() {
  State& g = Global();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.phases;
}

void SetVerbose(bool verbose) { g_verbose = verbose; }

Summary Summarize(double time_to_first_step_s) {
  Summary s;
  s.time_to_first_step_s = time_to_first_step_s;
  s.phases = Phases();
  double covered = 0;
  for (const PhaseRecord& p : s.phases) {
    if (p.depth == 0) covered += p.seconds;
  }
  s.other_s = std::max(0.0, time_to_first_step_s - covered);
  return s;
}

std::string FormatSummary(const Summary& s) {
  std::string out = fmt::format("time to first step {:.2f} s:", s.time_to_first_step_s);
  const char* sep = " ";
  for (const PhaseRecord& p : s.phases) {
    if (p.depth != 0) continue;
    out += fmt::format("{}{} {:.2f}", sep, p.name, p.seconds);
    sep = ", ";
    const char* inner = " (";
    for (const PhaseRecord& c : s.phases) {
      if (c.depth != 1 || c.name.rfind(p.name + "/", 0) != 0) continue;
      out += fmt::format("{}{} {:.2f}", inner, c.name.substr(p.name.size() + 1), c.seconds);
      inner = ", ";
    }
    if (*inner == ',') out += ")";
  }
  out += fmt::format("{}other {:.2f}", sep, s.other_s);
  return out;
}

void ResetForTest() {
  State& g = Global();
  std::lock_guard<std::mutex> lock(g.mu);
  g.phases.clear();
}

}  // namespace hypertrain::startup
