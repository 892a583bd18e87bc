// hypertrain: one binary, several subcommands, all parsed with CLI11
// (core/cli.h conventions):
//   hypertrain [--log-format=text|json] [--log-level=LEVEL] <command> [flags]
//   hypertrain <command> --help    (its flags, with defaults; exit 0)
//   hypertrain --help | --version  (exit 0)
// A bad, unknown or missing flag, an extra argument or an unknown command
// prints the error naming it and exits 2 (contract/exit_codes.h). The log
// flags are taken before the command or among its flags.
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/cli.h"
#include "core/log.h"
#include "runtime/cmd/commands.h"
#include "runtime/cmd/cuda_parts.h"
#include "runtime/cmd/log_flags.h"
#include "runtime/estimate/estimate.h"
#include "runtime/launch/launch.h"
#include "runtime/trace/merge.h"
#include "contract/exit_codes.h"

namespace hypertrain::cmd {
namespace {

// A subcommand whose flags another package declares (it needs no log flags).
Command Add(CLI::App& hypertrain, const char* name, const char* description,
            const std::function<std::function<int()>(CLI::App&)>& add_flags) {
  CLI::App* app = hypertrain.add_subcommand(name, description);
  std::function<int()> run = add_flags(*app);
  return {app, [run](const LogFlags&) { return run(); }};
}

// `hypertrain help [COMMAND]`: the same as --help (not listed).
void AddHelpCommand(CLI::App& hypertrain, std::string* command) {
  CLI::App* help = hypertrain.add_subcommand("help", "Print this help, or a command's");
  help->group("");
  help->add_option("command", *command, "A command");
}

int Main(int argc, char** argv) {
  CLI::App app("Distributed LLM training: one binary, several commands (--flag value or --flag=value).",
               "hypertrain");
  cli::UseHelpFormatter(app);
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  app.footer(fmt::format("Run hypertrain <command> --help for a command's flags.\nThis build: {}",
                         CudaBuiltIn() ? "CPU and CUDA backends" : "CPU backend only (CUDA not built in)"));
  LogFlags log_flags;
  AddLogFlags(app, &log_flags);
  cli::AddVersionFlag(app);
  const std::vector<Command> commands = {
      AddTrainCommand(app),
      AddConfigCommand(app),
      AddPrepareCommand(app),
      AddTokenizeCommand(app),
      AddDetokenizeCommand(app),
      AddLaunchCommand(app),
      Add(app, "bench", "CUDA training throughput on synthetic data", AddBenchFlags),
      Add(app, "estimate", "Parameters, FLOPs, memory, fit, speed and cost of a config",
          estimate::AddEstimateFlags),
      Add(app, "trace", "Merge or check step traces (trainer.profile)", trace::AddTraceCommands),
  };
  for (const Command& c : commands) AddLogFlags(*c.app, &log_flags);
  std::string help_for;
  AddHelpCommand(app, &help_for);

  // With --log-format json anywhere, the usage errors below are JSON log
  // lines too (the flags are not parsed yet when they are found).
  const bool json = log::JsonRequested(argc, argv);
  if (json) log::Init(log::Format::kJson, spdlog::level::info, {{"command", "hypertrain"}});
  auto usage_error = [json](const std::string& message) {
    if (json) {
      spdlog::error("{}", message);
    } else {
      std::fprintf(stderr, "%s\n", message.c_str());
    }
    return cli::kUsageError;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::vector<std::string> extras = app.remaining();
    if (app.get_subcommands().empty() && !extras.empty() && extras.front()[0] != '-' &&
        e.get_exit_code() != 0) {
      return usage_error("hypertrain: unknown command '" + extras.front() + "'\nRun with --help for the commands.");
    }
    if (json && e.get_exit_code() != 0) {
      const std::string path = cli::CommandPath(app);
      return usage_error(path + ": " + e.what() + "\nRun " + path + " --help for more information.");
    }
    return cli::Exit(app, e);
  }
  const CLI::App* chosen = app.get_subcommands().front();
  if (chosen->get_name() == "help") {
    const CLI::App* about = &app;
    if (!help_for.empty()) {
      try {
        about = app.get_subcommand(help_for);
      } catch (const CLI::OptionNotFound&) {
        return usage_error("hypertrain help: unknown command '" + help_for + "'");
      }
    }
    // (app.help() would describe the selected subcommand: help itself.)
    const std::string name = help_for.empty() ? "hypertrain" : "hypertrain " + help_for;
    std::printf("%s", app.get_formatter()->make_help(about, name, CLI::AppFormatMode::Normal).c_str());
    return contract::kExitOk;
  }
  if (Status s = log::Init(log_flags.format, log_flags.level,
                           LogContext(chosen->get_name(), ProcessEnvironment()));
      !s.ok()) {
    std::fprintf(stderr, "hypertrain: %s\n", s.message().c_str());
    return cli::kUsageError;
  }
  for (const Command& c : commands) {
    if (c.app == chosen) return c.run(log_flags);
  }
  return contract::kExitInternal;  // every subcommand but help is in `commands`
}

}  // namespace
}  // namespace hypertrain::cmd

int main(int argc, char** argv) { return hypertrain::cmd::Main(argc, argv); }
