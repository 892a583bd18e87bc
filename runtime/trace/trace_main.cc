// hypertrain trace merge | check
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "runtime/trace/merge.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::trace {
namespace {

constexpr char kUsage[] =
    "usage: hypertrain trace merge [-o merged.json.gz] [--no-align] INPUT...\n"
    "       hypertrain trace check FILE...\n"
    "  merge: puts the per-rank traces of a run (trainer.profile) on one timeline.\n"
    "         INPUT is a trace-rank<R>.json.gz file or a directory holding them;\n"
    "         -o defaults to merged.json.gz in the first input's directory. Ranks\n"
    "         are aligned on the wall clock, then on the world group's collectives\n"
    "         (--no-align: wall clock only). Prints a per-rank summary.\n"
    "  check: validates trace files (Chrome/Perfetto JSON trace event format).\n"
    "  Open the result in https://ui.perfetto.dev (or chrome://tracing).\n";

bool IsDir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string DirOf(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

int Fail(const Status& s) {
  spdlog::error("hypertrain trace: {}", s.message());
  return train::ExitCodeFor(s);
}

int Merge(const std::vector<std::string>& args) {
  std::string out;
  MergeOptions options;
  std::vector<std::string> files;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--out") {
      if (i + 1 >= args.size()) return Fail(InvalidArgument("-o needs a path"));
      out = args[++i];
    } else if (args[i] == "--no-align") {
      options.align_on_collectives = false;
    } else if (!args[i].empty() && args[i][0] == '-') {
      return Fail(InvalidArgument("unknown flag '" + args[i] + "'"));
    } else if (IsDir(args[i])) {
      auto found = RankFiles(args[i]);
      if (!found.ok()) return Fail(found.status());
      files.insert(files.end(), found->begin(), found->end());
    } else {
      files.push_back(args[i]);
    }
  }
  if (files.empty()) {
    std::fputs(kUsage, stderr);
    return train::kExitConfigError;
  }
  if (out.empty()) out = (IsDir(args.back()) ? args.back() : DirOf(files.front())) + "/merged.json.gz";
  std::vector<nlohmann::json> docs;
  for (const std::string& f : files) {
    auto doc = ReadTrace(f);
    if (!doc.ok()) return Fail(doc.status());
    if (Status s = Validate(*doc); !s.ok()) return Fail(InvalidArgument(f + ": " + s.message()));
    docs.push_back(std::move(*doc));
  }
  MergeReport report;
  auto merged = Merge(docs, options, &report);
  if (!merged.ok()) return Fail(merged.status());
  if (Status s = WriteTrace(*merged, out); !s.ok()) return Fail(s);
  std::printf("merged %d ranks, %lld events, %.3f s: %s\n", report.ranks,
              static_cast<long long>(report.events), report.span_us / 1e6, out.c_str());
  for (size_t i = 0; i < files.size(); ++i) {
    if (report.collective_fix_us[i] != 0) {
      std::printf("  %s: clock moved %.1f us to match the world group's collectives\n", files[i].c_str(),
                  report.collective_fix_us[i]);
    }
  }
  std::fputs(Summarize(*merged).c_str(), stdout);
  return train::kExitOk;
}

int Check(const std::vector<std::string>& files) {
  if (files.empty()) {
    std::fputs(kUsage, stderr);
    return train::kExitConfigError;
  }
  for (const std::string& f : files) {
    auto doc = ReadTrace(f);
    if (!doc.ok()) return Fail(doc.status());
    if (Status s = Validate(*doc); !s.ok()) return Fail(InvalidArgument(f + ": " + s.message()));
    std::printf("%s: ok, %zu events\n", f.c_str(), (*doc)["traceEvents"].size());
  }
  return train::kExitOk;
}

}  // namespace

int TraceMain(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? train::kExitConfigError : train::kExitOk;
  }
  const std::string sub = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
  if (sub == "merge") return Merge(rest);
  if (sub == "check") return Check(rest);
  spdlog::error("hypertrain trace: unknown subcommand '{}'", sub);
  std::fputs(kUsage, stderr);
  return train::kExitConfigError;
}

}  // namespace hypertrain::trace
