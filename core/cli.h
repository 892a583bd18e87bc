#pragma once
// Command-line flags for every hypertrain binary, on CLI11 (Debian
// libcli11-dev). Each binary declares its flags on a CLI::App; these helpers
// give them the same conventions:
//   --flag value and --flag=value; -h/--help prints the usage and exits 0;
//   --version prints "<program> <git describe>" and exits 0; a bad or unknown
//   flag prints "<program> [<subcommand>...]: <error>" and "Run <program>
//   [<subcommand>...] --help for more information." on stderr and exits 2.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hypertrain::cli {

// Exit code for a bad flag, a bad config or any other usage error.
inline constexpr int kUsageError = 2;

// --help with the flags' values as "TYPE CONSTRAINT=DEFAULT" ("N >= 2=16",
// "auto|always|never=auto"), nothing after a boolean flag, no "=[]" after a
// repeatable one. Set it before adding subcommands (they inherit it).
void UseHelpFormatter(CLI::App& app);

// Adds --version (core/version.h) to `app`; -h/--help is CLI11's own.
void AddVersionFlag(CLI::App& app);

// Parses; nullopt to go on, else the code to exit with (help, version or an
// error have been printed).
std::optional<int> Parse(CLI::App& app, int argc, char** argv);
// Turns an exception from app.parse(...) into the exit code, printing as above
// (for binaries that parse subcommands themselves).
int Exit(CLI::App& app, const CLI::ParseError& e);
// "<program> <subcommand> ...": the names of the subcommands selected by the
// last parse, below `app`.
std::string CommandPath(const CLI::App& app);

// Validators with the project's messages.
// Accepts only "true" or "false" (not CLI11's yes/on/1).
extern const CLI::Validator kTrueFalse;
// Integers > 0 and >= 0 ("must be a positive integer, got '0'").
extern const CLI::Validator kPositive;
extern const CLI::Validator kNonNegative;
// An integer in [min, max] ("must be an integer in [1, 4096], got 'x'"; help
// shows "in [1, 4096]", or ">= 2" without an upper bound).
CLI::Validator IntRange(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());
// A number in [min, max] (help: "in [0, 3600]").
CLI::Validator NumberRange(double min, double max);
// One of `choices` ("must be one of auto, always, never, got 'x'"; help
// shows "auto|always|never").
CLI::Validator OneOf(std::initializer_list<const char*> choices);
// --log-level and --log-format values that core/log.h accepts.
extern const CLI::Validator kLogLevel;
extern const CLI::Validator kLogFormat;

}  // namespace hypertrain::cli
