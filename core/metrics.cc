#include "core/metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

namespace hypertrain::metrics {

void Die(const std::string& what) {
  spdlog::critical("metrics: {}", what);
  spdlog::default_logger()->flush();
  std::abort();
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      Die("histogram bounds must be finite and ascending");
    }
  }
}

void Histogram::Observe(double v) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();  // first le >= v
  std::lock_guard<std::mutex> l(mu_);
  ++counts_[bucket];
  sum_ += v;
}

Histogram::Snapshot Histogram::Snap() const {
  std::lock_guard<std::mutex> l(mu_);
  Snapshot s;
  uint64_t running = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(running += c);
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> b;
  for (int i = 0; i < count; ++i, start *= factor) b.push_back(start);
  return b;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

std::string EscapeHelp(const std::string& h) {
  std::string out;
  for (char c : h) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// {a="x",b="y"} with an optional extra label (a histogram's le); empty without labels.
std::string LabelSet(const std::vector<std::string>& names, const LabelValues& values, const std::string& extra_name = "",
                     const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (out.empty() ? "" : ",") + names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra_name.empty()) out += (out.empty() ? "" : ",") + extra_name + "=\"" + extra_value + "\"";
  return out.empty() ? out : "{" + out + "}";
}

void Header(std::ostringstream& o, const std::string& name, const std::string& help, const char* type) {
  o << "# HELP " << name << " " << EscapeHelp(help) << "\n# TYPE " << name << " " << type << "\n";
}

template <class M>
void RenderScalar(std::ostringstream& o, const Family<M>& f, const char* type) {
  Header(o, f.name(), f.help(), type);
  f.ForEach([&](const LabelValues& values, const M& m) {
    o << f.name() << LabelSet(f.labels(), values) << " " << FormatValue(m.Value()) << "\n";
  });
}

void RenderHistogram(std::ostringstream& o, const Family<Histogram>& f) {
  Header(o, f.name(), f.help(), "histogram");
  f.ForEach([&](const LabelValues& values, const Histogram& h) {
    const Histogram::Snapshot s = h.Snap();
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      o << f.name() << "_bucket" << LabelSet(f.labels(), values, "le", FormatValue(h.bounds()[i])) << " "
        << s.cumulative[i] << "\n";
    }
    o << f.name() << "_bucket" << LabelSet(f.labels(), values, "le", "+Inf") << " " << s.count << "\n";
    o << f.name() << "_sum" << LabelSet(f.labels(), values) << " " << FormatValue(s.sum) << "\n";
    o << f.name() << "_count" << LabelSet(f.labels(), values) << " " << s.count << "\n";
  });
}

}  // namespace

void Registry::CheckNew(const std::string& name, const std::vector<std::string>& labels) const {
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kLabel("[a-zA-Z_][a-zA-Z0-9_]*");
  if (!std::regex_match(name, kName)) Die("bad metric name '" + name + "'");
  std::set<std::string> seen;
  for (const std::string& l : labels) {
    if (!std::regex_match(l, kLabel) || l.rfind("__", 0) == 0 || l == "le" || !seen.insert(l).second) {
      Die("bad or repeated label '" + l + "' on " + name);
    }
  }
  for (const Entry& e : entries_) {
    const std::string& other = e.counter ? e.counter->name() : e.gauge ? e.gauge->name() : e.histogram->name();
    if (other == name) Die("metric " + name + " registered twice");
  }
}

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> labels) {
  std::lock_guard<std::mutex> l(mu_);
  CheckNew(name, labels);
  Entry e{Type::kCounter, std::make_unique<Family<Counter>>(name, help, std::move(labels)), nullptr, nullptr};
  entries_.push_back(std::move(e));
  return *entries_.back().counter;
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  std::lock_guard<std::mutex> l(mu_);
  CheckNew(name, labels);
  Entry e{Type::kGauge, nullptr, std::make_unique<Family<Gauge>>(name, help, std::move(labels)), nullptr};
  entries_.push_back(std::move(e));
  return *entries_.back().gauge;
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<std::string> labels, std::vector<double> bounds) {
  std::lock_guard<std::mutex> l(mu_);
  CheckNew(name, labels);
  Histogram check(bounds);  // validates the bounds now, not at first use
  Entry e{Type::kHistogram, nullptr, nullptr,
          std::make_unique<Family<Histogram>>(name, help, std::move(labels), std::move(bounds))};
  entries_.push_back(std::move(e));
  return *entries_.back().histogram;
}

void Registry::OnScrape(std::function<void()> update) {
  std::lock_guard<std::mutex> l(mu_);
  on_scrape_.push_back(std::move(update));
}

std::string Registry::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& update : on_scrape_) update();
  std::ostringstream o;
  for (const Entry& e : entries_) {
    switch (e.type) {
      case Type::kCounter:
        RenderScalar(o, *e.counter, "counter");
        break;
      case Type::kGauge:
        RenderScalar(o, *e.gauge, "gauge");
        break;
      case Type::kHistogram:
        RenderHistogram(o, *e.histogram);
        break;
    }
  }
  return o.str();
}

namespace {

// /proc/self/stat fields after the command name: utime (14), stime (15),
// starttime (22), vsize (23), rss (24), numbered from 1 as in proc(5).
struct ProcStat {
  double cpu_seconds = 0, start_time_seconds = 0, virtual_bytes = 0, resident_bytes = 0;
};

double BootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::strtod(line.c_str() + 6, nullptr);
  }
  return 0;
}

bool ReadProcStat(ProcStat* s) {
  std::ifstream in("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return false;
  std::istringstream rest(all.substr(close + 2));
  std::vector<std::string> f{"", "", ""};  // pid, comm: fields 1 and 2 (index 0 unused)
  for (std::string x; rest >> x;) f.push_back(x);
  if (f.size() < 25) return false;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  s->cpu_seconds = (std::strtod(f[14].c_str(), nullptr) + std::strtod(f[15].c_str(), nullptr)) / tick;
  s->start_time_seconds = BootTime() + std::strtod(f[22].c_str(), nullptr) / tick;
  s->virtual_bytes = std::strtod(f[23].c_str(), nullptr);
  s->resident_bytes = std::strtod(f[24].c_str(), nullptr) * page;
  return true;
}

double OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  double n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

}  // namespace

void AddProcessMetrics(Registry* r) {
  auto& cpu = r->AddCounter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.").With();
  auto& rss = r->AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.").With();
  auto& vsz = r->AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.").With();
  auto& fds = r->AddGauge("process_open_fds", "Number of open file descriptors.").With();
  auto& max_fds = r->AddGauge("process_max_fds", "Maximum number of open file descriptors.").With();
  auto& start = r->AddGauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.").With();
  r->OnScrape([&] {
    ProcStat s;
    if (ReadProcStat(&s)) {
      cpu.SetFromSource(s.cpu_seconds);
      rss.Set(s.resident_bytes);
      vsz.Set(s.virtual_bytes);
      start.Set(s.start_time_seconds);
    }
    fds.Set(OpenFds());
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0) max_fds.Set(static_cast<double>(lim.rlim_cur));
  });
}

}  // namespace hypertrain::metrics
