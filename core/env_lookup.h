#pragma once
// EnvLookup: how the trainer reads configuration from its environment. Code
// that takes one is tested with a map (EnvFromMap) instead of setenv, and the
// process's environment (ProcessEnvironment) is read in one place. The launch
// and config packages name this same type (launch::EnvLookup, config::EnvLookup).
//
// Still raw getenv (each with a comment saying why): test helpers,
// benchmarks, and the operator pod's own identity (operator/cmd/main.cc). The
// checkpoint fault hook (core/atomic_file.cc) reads ProcessEnvironment().
#include <functional>
#include <map>
#include <string>

namespace hypertrain {

// The value of one variable: nullptr when unset, "" when set but empty. The
// pointer stays valid while the lookup lives (the process's: until setenv).
using EnvLookup = std::function<const char*(const char* name)>;

// The process's environment (getenv), read at each call.
EnvLookup ProcessEnvironment();

// A fixed set of variables (tests); the process's are not seen.
EnvLookup EnvFromMap(std::map<std::string, std::string> vars);

}  // namespace hypertrain
