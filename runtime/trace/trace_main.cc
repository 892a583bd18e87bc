// hypertrain trace merge | check
#include <sys/stat.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "runtime/trace/merge.h"
#include "contract/exit_code_for.h"

namespace hypertrain::trace {
namespace {

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
  return contract::ExitCodeFor(s);
}

int Merge(const std::vector<std::string>& inputs, std::string out, const MergeOptions& options) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    if (IsDir(input)) {
      auto found = RankFiles(input);
      if (!found.ok()) return Fail(found.status());
      files.insert(files.end(), found->begin(), found->end());
    } else {
      files.push_back(input);
    }
  }
  if (files.empty()) return Fail(InvalidArgument("no trace-rank*.json.gz files in " + inputs.back()));
  if (out.empty()) out = (IsDir(inputs.back()) ? inputs.back() : DirOf(files.front())) + "/merged.json.gz";
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
  return contract::kExitOk;
}

int Check(const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    auto doc = ReadTrace(f);
    if (!doc.ok()) return Fail(doc.status());
    if (Status s = Validate(*doc); !s.ok()) return Fail(InvalidArgument(f + ": " + s.message()));
    std::printf("%s: ok, %zu events\n", f.c_str(), (*doc)["traceEvents"].size());
  }
  return contract::kExitOk;
}

}  // namespace

std::function<int()> AddTraceCommands(CLI::App& trace) {
  trace.require_subcommand(1);
  trace.footer("Open a merged trace in https://ui.perfetto.dev (or chrome://tracing).");
  struct Flags {
    std::vector<std::string> inputs, files;
    std::string out;
    MergeOptions options;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* merge = trace.add_subcommand("merge", "Put the per-rank traces of a run on one timeline");
  merge->footer(
      "INPUT is a trace-rank<R>.json.gz file or a directory holding them. Ranks are aligned on the\n"
      "wall clock, then on the world group's collectives. Prints a per-rank summary.");
  merge->add_option("INPUT", f->inputs, "Per-rank trace files or directories")->type_name("FILE|DIR")->required();
  merge->add_option("-o,--out", f->out, "Merged trace")
      ->type_name("FILE")
      ->default_str("merged.json.gz in the first input's directory");
  merge->add_flag("!--no-align", f->options.align_on_collectives, "Align on the wall clock only");
  CLI::App* check = trace.add_subcommand("check", "Validate trace files (Chrome/Perfetto trace event format)");
  check->add_option("FILE", f->files, "Trace files")->type_name("FILE")->required();
  return [f, merge] {
    return merge->parsed() ? Merge(f->inputs, f->out, f->options) : Check(f->files);
  };
}

}  // namespace hypertrain::trace
