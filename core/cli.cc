#include "core/cli.h"

#include <iostream>

#include "core/log.h"
#include "core/version.h"

namespace hypertrain::cli {

namespace {

class HelpFormatter : public CLI::Formatter {
 public:
  // Without the "{false}" CLI11 appends to a negated flag.
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    const size_t brace = name.find('{');
    if (brace != std::string::npos && name.back() == '}') name.erase(brace);
    return name;
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_type_size() == 0) return "";  // a flag
    // get_type_name() is "TYPE:VALIDATOR:..."; TYPE may be empty.
    std::string type = opt->get_type_name();
    while (!type.empty() && type[0] == ':') type.erase(0, 1);
    for (char& c : type) {
      if (c == ':') c = ' ';
    }
    std::string out = type.empty() ? "" : " " + type;
    const std::string& def = opt->get_default_str();
    if (!def.empty() && def != "[]" && def != "{}") out += "=" + def;
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " (required)";
    return out;
  }
};

}  // namespace

void UseHelpFormatter(CLI::App& app) {
  auto f = std::make_shared<HelpFormatter>();
  f->column_width(36);
  app.formatter(f);
}

void AddVersionFlag(CLI::App& app) {
  app.set_version_flag("--version", app.get_name() + " " + Version(), "Print the version and exit");
}

std::string CommandPath(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* a = &app; !a->get_subcommands().empty();) {
    a = a->get_subcommands().front();
    path += " " + a->get_name();
  }
  return path;
}

int Exit(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    app.exit(e);  // help or version, on stdout
    return 0;
  }
  const std::string path = CommandPath(app);
  std::cerr << path << ": " << e.what() << "\nRun " << path << " --help for more information.\n";
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

std::string Bounds(const std::string& lo, const std::string& hi, bool unbounded) {
  return unbounded ? ">= " + lo : "in [" + lo + ", " + hi + "]";
}

}  // namespace

CLI::Validator IntRange(int64_t min, int64_t max) {
  const std::string bounds =
      Bounds(std::to_string(min), std::to_string(max), max == std::numeric_limits<int64_t>::max());
  return CLI::Validator(
      [min, max, bounds](std::string& v) {
        try {
          size_t used = 0;
          const long long n = std::stoll(v, &used);
          if (used == v.size() && n >= min && n <= max) return std::string();
        } catch (...) {
        }
        return "must be an integer " + bounds + ", got '" + v + "'";
      },
      bounds);
}

CLI::Validator NumberRange(double min, double max) {
  auto text = [](double d) {
    std::string s = std::to_string(d);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  };
  const std::string bounds = Bounds(text(min), text(max), false);
  return CLI::Validator(
      [min, max, bounds](std::string& v) {
        try {
          size_t used = 0;
          const double d = std::stod(v, &used);
          if (used == v.size() && d >= min && d <= max) return std::string();
        } catch (...) {
        }
        return "must be a number " + bounds + ", got '" + v + "'";
      },
      bounds);
}

CLI::Validator OneOf(std::initializer_list<const char*> choices) {
  std::vector<std::string> list(choices.begin(), choices.end());
  std::string bar, comma;
  for (size_t i = 0; i < list.size(); ++i) {
    bar += (i ? "|" : "") + list[i];
    comma += (i == 0 ? "" : i + 1 == list.size() ? " or " : ", ") + list[i];
  }
  return CLI::Validator(
      [list, comma](std::string& v) {
        for (const std::string& c : list) {
          if (v == c) return std::string();
        }
        return "must be " + comma + ", got '" + v + "'";
      },
      bar);
}

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
