#include "runtime/trace/merge.h"

#include <dirent.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/atomic_file.h"
#include "runtime/trace/gzip.h"

namespace hypertrain::trace {
namespace {

using nlohmann::json;

std::string Where(size_t i, const json& e) {
  std::string name = e.is_object() && e.contains("name") && e["name"].is_string()
                         ? e["name"].get<std::string>()
                         : "?";
  return fmt::format("traceEvents[{}] ('{}')", i, name);
}

bool IsNumber(const json& j, const char* key) { return j.contains(key) && j[key].is_number(); }

const json* HypertrainMeta(const json& doc) {
  if (!doc.contains("otherData") || !doc["otherData"].is_object()) return nullptr;
  const json& o = doc["otherData"];
  if (!o.contains("hypertrain") || !o["hypertrain"].is_object()) return nullptr;
  return &o["hypertrain"];
}

// End times of the world group's collectives by sequence number.
std::map<int64_t, double> WorldCollectiveEnds(const json& doc) {
  std::map<int64_t, double> ends;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "collective") continue;
    if (!e.contains("args") || !e["args"].is_object()) continue;
    const json& a = e["args"];
    if (a.value("group", "") != "world" || !a.contains("seq") || !a["seq"].is_number_integer()) continue;
    ends[a["seq"].get<int64_t>()] = e["ts"].get<double>() + e["dur"].get<double>();
  }
  return ends;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StatusOr<json> ReadTrace(const std::string& path) {
  HT_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  if (IsGzip(bytes)) {
    HT_ASSIGN_OR_RETURN(bytes, GzipDecompress(bytes, path));
  }
  json doc = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(path + ": not JSON");
  return doc;
}

StatusOr<std::vector<std::string>> RankFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return NotFound(dir + ": cannot open directory");
  std::vector<std::pair<long, std::string>> found;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    long rank = -1;
    char tail[16] = {0};
    if (std::sscanf(n.c_str(), "trace-rank%ld%15s", &rank, tail) == 2 && std::string(tail) == ".json.gz") {
      found.push_back({rank, dir + "/" + n});
    }
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  if (out.empty()) return NotFound(dir + ": no trace-rank*.json.gz files");
  return out;
}

Status Validate(const json& doc) {
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return InvalidArgument("not a trace: no traceEvents array");
  }
  const json& events = doc["traceEvents"];
  static const std::set<std::string> kPhases = {"X", "B", "E", "i", "I", "C", "M", "s", "t", "f"};
  std::set<int64_t> named_pids;
  std::set<std::pair<int64_t, int64_t>> named_tracks, used_tracks;
  std::set<int64_t> used_pids;
  // Per track: (begin, end, index) of its X events.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::tuple<double, double, size_t>>> spans;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object()) return InvalidArgument(fmt::format("traceEvents[{}] is not an object", i));
    if (!e.contains("ph") || !e["ph"].is_string() || !kPhases.count(e["ph"].get<std::string>())) {
      return InvalidArgument(Where(i, e) + ": missing or unknown \"ph\"");
    }
    const std::string ph = e["ph"];
    if (!e.contains("name") || !e["name"].is_string()) return InvalidArgument(Where(i, e) + ": no \"name\"");
    if (!e.contains("pid") || !e["pid"].is_number_integer()) return InvalidArgument(Where(i, e) + ": no integer \"pid\"");
    const int64_t pid = e["pid"];
    if (ph == "M") {
      const std::string n = e["name"];
      if (n == "process_name") named_pids.insert(pid);
      if (n == "thread_name" && e.contains("tid") && e["tid"].is_number_integer()) {
        named_tracks.insert({pid, e["tid"].get<int64_t>()});
      }
      continue;
    }
    if (!IsNumber(e, "ts")) return InvalidArgument(Where(i, e) + ": no numeric \"ts\"");
    used_pids.insert(pid);
    if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        return InvalidArgument(Where(i, e) + ": a counter needs args");
      }
      for (const auto& [k, v] : e["args"].items()) {
        if (!v.is_number()) return InvalidArgument(Where(i, e) + ": counter series '" + k + "' is not a number");
      }
      continue;
    }
    if (!e.contains("tid") || !e["tid"].is_number_integer()) return InvalidArgument(Where(i, e) + ": no integer \"tid\"");
    const std::pair<int64_t, int64_t> track{pid, e["tid"].get<int64_t>()};
    used_tracks.insert(track);
    if (ph == "X") {
      if (!IsNumber(e, "dur") || e["dur"].get<double>() < 0) {
        return InvalidArgument(Where(i, e) + ": an \"X\" event needs \"dur\" >= 0");
      }
      const double b = e["ts"].get<double>();
      spans[track].push_back({b, b + e["dur"].get<double>(), i});
    }
  }
  for (int64_t pid : used_pids) {
    if (!named_pids.count(pid)) return InvalidArgument(fmt::format("process {} has no process_name", pid));
  }
  for (const auto& t : used_tracks) {
    if (!named_tracks.count(t)) {
      return InvalidArgument(fmt::format("track {} of process {} has no thread_name", t.second, t.first));
    }
  }
  // Nesting: sorted by begin (longer first on ties), every span must end
  // before the innermost open span that contains its start.
  constexpr double kSlackUs = 1e-3;
  for (auto& [track, list] : spans) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b) : std::get<1>(a) > std::get<1>(b);
    });
    std::vector<std::tuple<double, double, size_t>> open;
    for (const auto& s : list) {
      while (!open.empty() && std::get<1>(open.back()) <= std::get<0>(s) + kSlackUs) open.pop_back();
      if (!open.empty() && std::get<1>(s) > std::get<1>(open.back()) + kSlackUs) {
        return InvalidArgument(fmt::format(
            "{} overlaps {} on track {} of process {} without nesting in it",
            Where(std::get<2>(s), events[std::get<2>(s)]), Where(std::get<2>(open.back()), events[std::get<2>(open.back())]),
            track.second, track.first));
      }
      open.push_back(s);
    }
  }
  return Status::Ok();
}

StatusOr<json> Merge(const std::vector<json>& docs, const MergeOptions& options, MergeReport* report) {
  if (docs.empty()) return InvalidArgument("nothing to merge");
  std::vector<int64_t> ranks, zeros;
  std::vector<std::string> hosts;
  for (size_t i = 0; i < docs.size(); ++i) {
    HT_RETURN_IF_ERROR(Validate(docs[i]));
    const json* meta = HypertrainMeta(docs[i]);
    if (meta == nullptr || !meta->contains("rank") || !meta->contains("unix_us_at_zero")) {
      return InvalidArgument(fmt::format("input {}: not a hypertrain rank trace (no otherData.hypertrain)", i));
    }
    const int64_t rank = (*meta)["rank"];
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) {
      return InvalidArgument(fmt::format("two inputs are rank {}", rank));
    }
    ranks.push_back(rank);
    zeros.push_back((*meta)["unix_us_at_zero"]);
    // Ranks of one host share its clock; without a host name a rank is its own.
    const std::string host = meta->contains("host") && (*meta)["host"].is_string() ? (*meta)["host"].get<std::string>() : "";
    hosts.push_back(host.empty() ? fmt::format("rank {}", rank) : host);
  }
  const int64_t base = *std::min_element(zeros.begin(), zeros.end());
  std::vector<double> shift(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) shift[i] = static_cast<double>(zeros[i] - base);
  std::vector<double> fix(docs.size(), 0.0);
  if (options.align_on_collectives && docs.size() > 1) {
    // One correction per host (its ranks read the same clock; correcting
    // them one by one would turn their threads' wake-up jitter into skew):
    // the median over the host's ranks and the collectives they share with
    // the lowest rank. The lowest rank's host stays on its wall clock.
    const size_t ref = static_cast<size_t>(std::min_element(ranks.begin(), ranks.end()) - ranks.begin());
    const std::map<int64_t, double> ref_ends = WorldCollectiveEnds(docs[ref]);
    std::map<std::string, std::vector<double>> diffs;
    for (size_t i = 0; i < docs.size(); ++i) {
      if (hosts[i] == hosts[ref]) continue;
      for (const auto& [seq, end] : WorldCollectiveEnds(docs[i])) {
        auto it = ref_ends.find(seq);
        if (it != ref_ends.end()) diffs[hosts[i]].push_back((it->second + shift[ref]) - (end + shift[i]));
      }
    }
    for (size_t i = 0; i < docs.size(); ++i) {
      auto it = diffs.find(hosts[i]);
      if (it != diffs.end() && !it->second.empty()) fix[i] = Median(it->second);
    }
  }
  json out_events = json::array();
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < docs.size(); ++i) {
    for (const json& e : docs[i]["traceEvents"]) {
      json c = e;
      if (c.contains("ts") && c["ts"].is_number()) {
        const double ts = c["ts"].get<double>() + shift[i] + fix[i];
        c["ts"] = ts;
        lo = std::min(lo, ts);
        hi = std::max(hi, ts + (c.contains("dur") ? c["dur"].get<double>() : 0.0));
      }
      out_events.push_back(std::move(c));
    }
  }
  if (!std::isfinite(lo)) lo = hi = 0;
  for (json& e : out_events) {
    if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() - lo;
  }
  json inputs = json::array();
  for (size_t i = 0; i < docs.size(); ++i) {
    json m = *HypertrainMeta(docs[i]);
    m["shift_us"] = shift[i] - lo;
    m["collective_fix_us"] = fix[i];
    inputs.push_back(m);
  }
  json merged = {{"traceEvents", std::move(out_events)},
                 {"displayTimeUnit", "ms"},
                 {"otherData", {{"hypertrain", {{"format", 1}, {"merged", inputs}, {"unix_us_at_zero", base + static_cast<int64_t>(lo)}}}}}};
  HT_RETURN_IF_ERROR(Validate(merged));
  if (report != nullptr) {
    report->ranks = static_cast<int>(docs.size());
    report->events = static_cast<int64_t>(merged["traceEvents"].size());
    report->span_us = hi - lo;
    report->collective_fix_us = fix;
  }
  return merged;
}

std::string Summarize(const json& doc) {
  struct Track {
    int64_t count = 0;
    double us = 0, bytes = 0;
  };
  // pid -> name -> totals; host phases by name, collective/device tracks by track name.
  std::map<int64_t, std::map<std::string, Track>> host, tracks;
  std::map<std::pair<int64_t, int64_t>, std::string> track_names;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
      track_names[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}] = e["args"].value("name", "?");
    }
  }
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const int64_t pid = e["pid"];
    const std::string cat = e.value("cat", "");
    const double dur = e["dur"];
    if (cat == "host") {
      Track& t = host[pid][e["name"].get<std::string>()];
      ++t.count;
      t.us += dur;
    } else if (cat == "collective" || cat == "device") {
      Track& t = tracks[pid][track_names[{pid, e["tid"].get<int64_t>()}]];
      ++t.count;
      t.us += dur;
      if (e.contains("args") && e["args"].is_object() && e["args"].contains("bytes") &&
          e["args"]["bytes"].is_number()) {
        t.bytes += e["args"]["bytes"].get<double>();
      }
    }
  }
  std::string out;
  std::set<int64_t> pids;
  for (const auto& [p, _] : host) pids.insert(p);
  for (const auto& [p, _] : tracks) pids.insert(p);
  for (int64_t pid : pids) {
    std::string line = fmt::format("rank {}:", pid);
    const auto& h = host[pid];
    auto steps = h.find("step");
    if (steps != h.end() && steps->second.count > 0) {
      line += fmt::format(" {} steps, {:.2f} ms per step", steps->second.count,
                          steps->second.us / steps->second.count / 1000.0);
      std::string parts;
      for (const char* phase : {"data", "forward", "backward", "finish_gradients", "optimizer", "checkpoint"}) {
        auto it = h.find(phase);
        if (it == h.end()) continue;
        parts += fmt::format("{}{} {:.2f}", parts.empty() ? "" : ", ", phase,
                             it->second.us / steps->second.count / 1000.0);
      }
      if (!parts.empty()) line += " (" + parts + ")";
    }
    for (const auto& [name, t] : tracks[pid]) {
      line += fmt::format("; {}: {} x, {:.2f} ms", name, t.count, t.us / 1000.0);
      if (t.bytes > 0) line += fmt::format(", {:.2f} MB", t.bytes / 1e6);
    }
    out += line + "\n";
  }
  return out;
}

Status WriteTrace(const json& doc, const std::string& path) {
  std::string bytes = doc.dump();
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    HT_ASSIGN_OR_RETURN(bytes, GzipCompress(bytes));
  }
  return WriteFileAtomically(path, bytes);
}

}  // namespace hypertrain::trace
