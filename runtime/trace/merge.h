#pragma once
// Reading, checking and merging trace files (runtime/trace/recorder.h).
//
// Merge puts every rank's file on one timeline: each file's timestamps are
// moved to the wall clock (its otherData.hypertrain.unix_us_at_zero), then
// — when the files recorded collectives of the world group — each host's
// offset to the lowest rank's host is corrected by the median difference of
// the END times of the same collectives (args.seq) over the host's ranks: an
// all-reduce ends at nearly the same moment on every rank, so this removes
// clock skew between hosts (NTP: milliseconds) that the wall clock leaves.
// Ranks of one host (otherData.hypertrain.host) share its clock and get one
// correction; a file without a host is its own. The earliest event becomes
// time 0. Ranks stay separate processes (pid = rank).
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hypertrain::trace {

// A trace document from a .json or .json.gz file. NotFound / DataLoss /
// InvalidArgument (not JSON) naming the path.
StatusOr<nlohmann::json> ReadTrace(const std::string& path);

// The trace-rank*.json.gz files of a directory, in rank order.
StatusOr<std::vector<std::string>> RankFiles(const std::string& dir);

// What the Chrome/Perfetto JSON importers need, and what hypertrain's files
// promise: {"traceEvents": [...]}; every event an object with "ph", "name",
// "pid" (and "tid", "ts" except process metadata); "X" events with
// "dur" >= 0; on every track the "X" events nest (none ends inside another
// without starting inside it); counters' args are numbers; every process and
// every track with events is named. InvalidArgument naming the event.
Status Validate(const nlohmann::json& doc);

struct MergeOptions {
  bool align_on_collectives = true;
};

struct MergeReport {
  int ranks = 0;
  int64_t events = 0;
  double span_us = 0;                    // first to last event
  std::vector<double> collective_fix_us;  // per input, the skew removed (0 for the reference)
};

// Merges per-rank documents (each validated first). InvalidArgument for two
// files of the same rank or a file without hypertrain's otherData.
StatusOr<nlohmann::json> Merge(const std::vector<nlohmann::json>& docs, const MergeOptions& options,
                               MergeReport* report);

// Per rank: time in the host phases and on each collective track (count,
// bytes, time), one line each.
std::string Summarize(const nlohmann::json& doc);

// Writes `doc` to `path`: gzip when it ends in ".gz", else plain JSON;
// atomically.
Status WriteTrace(const nlohmann::json& doc, const std::string& path);

// Declares `hypertrain trace`'s subcommands on `trace` (a CLI11 subcommand):
// `merge [-o OUT] [--no-align] INPUT...` and `check FILE...`; the returned
// function runs the one a parse selected and returns the exit code.
std::function<int()> AddTraceCommands(CLI::App& trace);

}  // namespace hypertrain::trace
