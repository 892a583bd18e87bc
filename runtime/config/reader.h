#pragma once
// Internal to runtime/config: typed reads of a resolved YAML document by
// dotted path, remembering every path asked for (the known keys) and keeping
// the first error.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::config::internal {

std::vector<std::string> SplitPath(const std::string& path);
YAML::Node Lookup(const YAML::Node& root, const std::string& path);

class Reader {
 public:
  explicit Reader(YAML::Node root) { root_.reset(root); }
  const std::set<std::string>& read() const { return read_; }
  Status status() const { return status_; }
  // Defined and not null.
  bool Has(const std::string& path) {
    read_.insert(path);
    const YAML::Node n = Lookup(root_, path);
    return n.IsDefined() && !n.IsNull();
  }
  void Int(const std::string& path, int64_t* out) { Scalar(path, out, "an integer"); }
  // An integer count where Lightning also takes a float as a fraction (of an
  // epoch, of the validation set): a fraction is refused saying so, not
  // called "not an integer". `unit` names what the count counts.
  void Count(const std::string& path, int64_t* out, const char* fraction_of, const char* unit) {
    const YAML::Node n = Lookup(root_, path);
    double d = 0;
    if (n.IsScalar() && n.Scalar().find_first_of(".eE") != std::string::npos && YAML::convert<double>::decode(n, d)) {
      read_.insert(path);
      Fail(InvalidArgument(fmt::format("{}: {} is a fraction (Lightning: of {}); fractions are not supported: give "
                                       "a whole number of {}",
                                       path, n.Scalar(), fraction_of, unit)));
      return;
    }
    Int(path, out);
  }
  // inf and NaN parse as YAML numbers (.inf, .nan) but are never a valid
  // setting: they would train non-finite state (issue 18).
  void Double(const std::string& path, double* out) {
    Scalar(path, out, "a number");
    if (!std::isfinite(*out)) Fail(InvalidArgument(fmt::format("{}: {} is not a finite number", path, *out)));
  }
  // YAML 1.1 booleans: true/false, True/False, yes/no, on/off (any case form).
  // Also 0/1 (environment overrides).
  void Bool(const std::string& path, bool* out) {
    const YAML::Node n = Lookup(root_, path);
    if (n.IsScalar() && (n.Scalar() == "0" || n.Scalar() == "1")) {
      read_.insert(path);
      *out = n.Scalar() == "1";
      return;
    }
    Scalar(path, out, "true or false");
  }
  void String(const std::string& path, std::string* out) { Scalar(path, out, "a string"); }
  // A name that `parse` turns into an enum value, once, here; its error names
  // the key and the accepted names. Absent or null: *out keeps its default.
  template <typename E>
  void Enum(const std::string& path, E* out, StatusOr<E> (*parse)(const std::string&)) {
    std::string name;
    String(path, &name);
    if (!Lookup(root_, path).IsScalar()) return;  // absent, null, or String's error
    StatusOr<E> v = parse(name);
    if (v.ok()) {
      *out = *v;
    } else {
      Fail(v.status());
    }
  }
  void Fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  YAML::Node Node(const std::string& path) {
    read_.insert(path);
    return Lookup(root_, path);
  }
  // Marks a whole subtree as known (keys consumed elsewhere).
  void Claim(const std::string& path) { read_.insert(path + ".*"); }
  // Marks one key as known (read by contract/trainer_config.h).
  void Known(const std::string& path) { read_.insert(path); }

 private:
  template <typename T>
  void Scalar(const std::string& path, T* out, const char* what) {
    read_.insert(path);
    const YAML::Node n = Lookup(root_, path);
    if (!n.IsDefined() || n.IsNull()) return;
    if (!n.IsScalar()) {
      Fail(InvalidArgument(fmt::format("{}: expected {}, got a {}", path, what, n.IsMap() ? "map" : "list")));
      return;
    }
    try {
      *out = n.as<T>();
    } catch (const YAML::Exception&) {
      Fail(InvalidArgument(fmt::format("{}: '{}' is not {}", path, n.Scalar(), what)));
    }
  }
  YAML::Node root_;
  std::set<std::string> read_;
  Status status_;
};

// Keys a HyperPod recipe or launcher carries that have no effect here (the
// docs list them); "x.*" accepts a subtree.
const std::vector<std::string>& BookkeepingKeys();

// Whether `path` was read or is bookkeeping.
bool IsKnownKey(const std::string& path, const std::set<std::string>& read);

// "did you mean ...?" for an unknown key ("" when nothing is close).
std::string SuggestKey(const std::string& unknown, const std::set<std::string>& read);

}  // namespace hypertrain::config::internal

namespace hypertrain::config {
struct TrainConfig;
struct CudaConfig;
namespace internal {
// validate.cc: ranges of every numeric key (seed and prefetch depth before
// they are narrowed), then the cross-key rules and the defaults that follow
// from them (checkpoint_dir, export dir, auto_checkpoint, start-up notes).
Status ValidateRanges(const TrainConfig& c, int64_t seed, int64_t depth);
Status ValidateAndFinish(TrainConfig& c);
// cuda.*: values and ranges; reads gemm_autotune 0/1 as off/on.
Status ValidateCuda(CudaConfig& cu);
}  // namespace internal
}  // namespace hypertrain::config
