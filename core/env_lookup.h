#pragma once
// EnvLookup: how the trainer reads configuration from its environment. Code
// that takes one is tested with a map (EnvFromMap) instead of setenv, and the
// process's environment (ProcessEnvironment) is read in one place.
//
// Still raw getenv (each with a comment saying why): process-level test and
// fault-injection hooks (core/atomic_file.cc, test helpers), benchmarks, and
// the config package's override table (runtime/config). The older
// pointer-returning lookups (launch::EnvLookup, config::EnvLookup) adapt to
// this one with FromPointerLookup until they move over.
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace hypertrain {

// The value of one variable; nullopt when unset (a set but empty variable is "").
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process's environment (getenv).
EnvLookup ProcessEnvironment();

// A fixed set of variables (tests).
EnvLookup EnvFromMap(std::map<std::string, std::string> vars);

// A lookup returning a C string, nullptr when unset (the launch and config
// packages' lookups). A null `raw` reads nothing.
EnvLookup FromPointerLookup(std::function<const char*(const char*)> raw);

}  // namespace hypertrain
