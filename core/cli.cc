#include "core/cli.h"

#include <iostream>

#include "core/log.h"
#include "core/version.h"

namespace hypertrain::cli {

void AddVersionFlag(CLI::App& app) {
  app.set_version_flag("--version", app.get_name() + " " + Version(), "Print the version and exit");
}

int Exit(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    app.exit(e);  // help or version, on stdout
    return 0;
  }
  std::cerr << app.get_name() << ": " << e.what() << "\nRun with --help for more information.\n";
  return kUsageError;
}

std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return Exit(app, e);
  }
  return std::nullopt;
}

const CLI::Validator kTrueFalse(
    [](std::string& v) { return v == "true" || v == "false" ? std::string() : "must be true or false, got '" + v + "'"; },
    "true|false");

namespace {

std::string CheckInteger(const std::string& v, long long min, const char* what) {
  try {
    size_t used = 0;
    const long long n = std::stoll(v, &used);
    if (used == v.size() && n >= min) return "";
  } catch (...) {
  }
  return std::string("must be a ") + what + " integer, got '" + v + "'";
}

}  // namespace

const CLI::Validator kPositive([](std::string& v) { return CheckInteger(v, 1, "positive"); }, "N>0");
const CLI::Validator kNonNegative([](std::string& v) { return CheckInteger(v, 0, "non-negative"); }, "N>=0");

const CLI::Validator kLogLevel(
    [](std::string& v) {
      auto l = log::ParseLevel(v);
      return l.ok() ? std::string() : l.status().message();
    },
    "LEVEL");

const CLI::Validator kLogFormat(
    [](std::string& v) {
      auto f = log::ParseFormat(v);
      return f.ok() ? std::string() : f.status().message();
    },
    "text|json");

}  // namespace hypertrain::cli
