// Label and field selectors with Kubernetes syntax.
//
// Label selectors: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`
// (exists), `!a` (does not exist), comma-separated and AND-ed.
// Field selectors: `path=v`, `path==v`, `path!=v` on dotted JSON paths; the set
// of allowed paths is decided by the caller (per resource).
#pragma once

#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

class LabelSelector {
 public:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };

  // Parses `text`; an empty string selects everything.
  static StatusOr<LabelSelector> Parse(const std::string& text);
  // Matches the object's metadata.labels (absent labels = empty map).
  bool Matches(const json& object) const;
  bool Empty() const { return reqs_.empty(); }
  const std::vector<Requirement>& requirements() const { return reqs_; }

 private:
  std::vector<Requirement> reqs_;
};

class FieldSelector {
 public:
  struct Requirement {
    std::string field;  // dotted path
    bool equals;        // false = !=
    std::string value;
  };
  static StatusOr<FieldSelector> Parse(const std::string& text);
  // Checks every field against `allowed` (empty list = anything goes).
  Status CheckAllowed(const std::vector<std::string>& allowed, const std::string& kind) const;
  bool Matches(const json& object) const;
  bool Empty() const { return reqs_.empty(); }
  const std::vector<Requirement>& requirements() const { return reqs_; }

 private:
  std::vector<Requirement> reqs_;
};

// Value at a dotted path rendered as a field-selector string: strings as is,
// numbers/bools via their JSON text, missing/null as "".
std::string FieldValueAt(const json& object, const std::string& dotted_path);

}  // namespace kubelocal
