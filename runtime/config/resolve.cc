#include "runtime/config/resolve.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hypertrain::config {
namespace {

using Path = std::vector<std::string>;

// Bounds that keep a small document from growing without limit, each an
// InvalidArgument naming the key: every map key a scalar (a YAML complex key
// `? [a, b]` names no config key); at most kMaxDocumentNodes values and
// kMaxDocumentDepth levels with every alias expanded (an alias "billion
// laughs" bomb is a few lines that expand to 10^9 values); at most
// kMaxInterpolatedBytes in one resolved value and kMaxResolvedBytes produced by
// all of them (`${a}${a}...` nested ten deep is 700 bytes that expand to 10^10).
constexpr int64_t kMaxDocumentNodes = 100000;
constexpr int kMaxDocumentDepth = 64;
constexpr int64_t kMaxInterpolatedBytes = int64_t{1} << 20;
constexpr int64_t kMaxResolvedBytes = int64_t{16} << 20;

std::string Join(const Path& p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < p.size(); ++i) s += (i ? "." : "") + p[i];
  return s;
}
std::string Join(const Path& p) { return Join(p, p.size()); }

Path SplitDots(const std::string& s) {
  Path out;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// One piece of an interpolated string: literal text or a ${...} expression.
struct Piece {
  bool is_ref = false;
  std::string text;
};

StatusOr<std::vector<Piece>> Tokenize(const std::string& key, const std::string& s) {
  std::vector<Piece> out;
  std::string lit;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\\' && s.compare(i + 1, 2, "${") == 0) {
      lit += "${";
      i += 3;
      continue;
    }
    if (s.compare(i, 2, "${") != 0) {
      lit += s[i++];
      continue;
    }
    int depth = 0;
    size_t j = i;
    for (; j < s.size(); ++j) {
      if (s.compare(j, 2, "${") == 0) {
        ++depth;
        ++j;
      } else if (s[j] == '}' && --depth == 0) {
        break;
      }
    }
    if (j >= s.size()) return InvalidArgument(fmt::format("{}: '{}': unterminated '${{'", key, s));
    if (!lit.empty()) out.push_back({false, lit});
    lit.clear();
    out.push_back({true, Trim(s.substr(i + 2, j - i - 2))});
    i = j + 1;
  }
  if (!lit.empty()) out.push_back({false, lit});
  return out;
}

// Walks the document as if every alias were a copy, counting nodes; stops at
// the first limit crossed.
class DocumentCheck {
 public:
  Status Walk(const YAML::Node& n, const std::string& key, int depth) {
    if (++nodes_ > kMaxDocumentNodes) {
      return InvalidArgument(fmt::format("{}: the config holds more than {} values with its YAML aliases expanded "
                                         "(an alias bomb?); hypertrain reads configs up to that size",
                                         key.empty() ? "the top level" : key, kMaxDocumentNodes));
    }
    if (depth > kMaxDocumentDepth) {
      return InvalidArgument(fmt::format("{}: nested deeper than {} levels (a YAML alias that contains itself?)", key,
                                         kMaxDocumentDepth));
    }
    if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) {
        HT_RETURN_IF_ERROR(Walk(n[i], fmt::format("{}[{}]", key, i), depth + 1));
      }
    } else if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar()) {
          return InvalidArgument(fmt::format(
              "{}: line {}: a map key must be a plain name, got a {} (a YAML complex key '? ...' names no config key)",
              key.empty() ? "the top level" : key, it->first.Mark().line + 1, it->first.IsMap() ? "map" : "list"));
        }
        const std::string& k = it->first.Scalar();
        HT_RETURN_IF_ERROR(Walk(it->second, key.empty() ? k : key + "." + k, depth + 1));
      }
    }
    return Status::Ok();
  }

 private:
  int64_t nodes_ = 0;
};

// Scalar bytes and nodes under `n`, counted up to `cap`.
int64_t TreeSize(const YAML::Node& n, int64_t cap) {
  if (n.IsScalar()) return static_cast<int64_t>(n.Scalar().size()) + 1;
  int64_t total = 1;
  if (n.IsSequence() || n.IsMap()) {
    for (auto it = n.begin(); it != n.end() && total <= cap; ++it) {
      total += n.IsMap() ? TreeSize(it->first, cap) + TreeSize(it->second, cap) : TreeSize(*it, cap);
    }
  }
  return total;
}

bool HasInterpolation(const YAML::Node& n) {
  return n.IsScalar() && n.Scalar().find("${") != std::string::npos;
}

class Resolver {
 public:
  Resolver(YAML::Node root, const EnvLookup& env) : env_(env) { root_.reset(root); }

  // Resolves the node at `path` and everything under it.
  Status ResolveTree(const Path& path) {
    const YAML::Node n = Get(path);
    if (n.IsMap()) {
      std::vector<std::string> keys;
      for (auto it = n.begin(); it != n.end(); ++it) keys.push_back(it->first.as<std::string>());
      for (const std::string& k : keys) {
        Path child = path;
        child.push_back(k);
        HT_RETURN_IF_ERROR(ResolveTree(child));
      }
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) {
        Path child = path;
        child.push_back(std::to_string(i));
        HT_RETURN_IF_ERROR(ResolveTree(child));
      }
    } else if (HasInterpolation(n)) {
      HT_RETURN_IF_ERROR(ResolveLeaf(path));
    }
    return Status::Ok();
  }

 private:
  // The node at `path`; Undefined when absent.
  YAML::Node Get(const Path& path) const {
    YAML::Node n;
    n.reset(root_);
    for (const std::string& part : path) {
      YAML::Node child(YAML::NodeType::Undefined);
      if (n.IsMap()) {
        const YAML::Node& cn = n;
        YAML::Node c = cn[part];
        if (!c.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
        child.reset(c);
      } else if (n.IsSequence() && !part.empty() &&
                 std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
                 std::stoul(part) < n.size()) {
        YAML::Node c = n[std::stoul(part)];
        child.reset(c);
      } else {
        return YAML::Node(YAML::NodeType::Undefined);
      }
      if (!child.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
      n.reset(child);
    }
    return n;
  }

  void Set(const Path& path, const YAML::Node& value) {
    YAML::Node parent = Get(Path(path.begin(), path.end() - 1));
    if (parent.IsSequence()) {
      parent[std::stoul(path.back())] = value;
    } else {
      parent[path.back()] = value;
    }
  }

  Status ResolveLeaf(const Path& path) {
    const std::string key = Join(path);
    if (std::find(stack_.begin(), stack_.end(), key) != stack_.end()) {
      std::string chain;
      for (auto it = std::find(stack_.begin(), stack_.end(), key); it != stack_.end(); ++it) chain += *it + " -> ";
      return InvalidArgument(fmt::format("{}: interpolation cycle: {}{}", key, chain, key));
    }
    const YAML::Node n = Get(path);
    if (!HasInterpolation(n)) return Status::Ok();
    stack_.push_back(key);
    StatusOr<YAML::Node> value = Evaluate(path, n.Scalar());
    stack_.pop_back();
    if (!value.ok()) return value.status();
    Set(path, *value);
    return Status::Ok();
  }

  // The value of the interpolated string `text` found at `path`.
  StatusOr<YAML::Node> Evaluate(const Path& path, const std::string& text) {
    const std::string key = Join(path);
    HT_ASSIGN_OR_RETURN(std::vector<Piece> pieces, Tokenize(key, text));
    if (pieces.size() == 1 && pieces[0].is_ref) return Reference(path, pieces[0].text);
    std::string out;
    for (const Piece& p : pieces) {
      if (!p.is_ref) {
        out += p.text;
        continue;
      }
      HT_ASSIGN_OR_RETURN(YAML::Node v, Reference(path, p.text));
      if (v.IsNull()) {
        return InvalidArgument(fmt::format("{}: '{}': ${{{}}} is null and cannot be part of a string", key,
                                           text, p.text));
      }
      if (!v.IsScalar()) {
        return InvalidArgument(fmt::format("{}: '{}': ${{{}}} is a {}, not a scalar", key, text, p.text,
                                           v.IsMap() ? "map" : "list"));
      }
      if (static_cast<int64_t>(out.size() + v.Scalar().size()) > kMaxInterpolatedBytes) {
        return InvalidArgument(fmt::format("{}: '{}' expands to more than {} bytes (an interpolation bomb?)", key,
                                           text.substr(0, 80), kMaxInterpolatedBytes));
      }
      out += v.Scalar();
    }
    HT_RETURN_IF_ERROR(Spend(key, text, static_cast<int64_t>(out.size())));
    return YAML::Node(out);
  }

  // Every resolved value (string or copied subtree) counts against one
  // budget for the document.
  Status Spend(const std::string& key, const std::string& text, int64_t bytes) {
    produced_ += bytes;
    if (produced_ <= kMaxResolvedBytes) return Status::Ok();
    return InvalidArgument(fmt::format("{}: '{}': the config's interpolations expand to more than {} bytes (an "
                                       "interpolation bomb?)",
                                       key, text.substr(0, 80), kMaxResolvedBytes));
  }

  // The value of one ${expr} found at `path`.
  StatusOr<YAML::Node> Reference(const Path& path, const std::string& expr) {
    const std::string key = Join(path);
    if (expr.rfind("oc.env:", 0) == 0) return EnvValue(path, expr.substr(7));
    const size_t colon = expr.find(':');
    if (colon != std::string::npos) {
      return InvalidArgument(fmt::format("{}: ${{{}}}: resolver '{}' is not supported (supported: oc.env)",
                                         key, expr, expr.substr(0, colon)));
    }
    if (expr.empty()) return InvalidArgument(fmt::format("{}: empty interpolation ${{}}", key));
    Path target;
    std::string rest = expr;
    if (rest[0] == '.') {
      size_t dots = 0;
      while (dots < rest.size() && rest[dots] == '.') ++dots;
      // One dot: a sibling (the key's parent map); each further dot goes up.
      if (dots > path.size()) {
        return InvalidArgument(fmt::format("{}: ${{{}}} goes above the top of the config", key, expr));
      }
      target.assign(path.begin(), path.end() - static_cast<long>(dots));
      rest = rest.substr(dots);
    } else if (rest.rfind("recipes.", 0) == 0 && !Get({"recipes"}).IsDefined()) {
      rest = rest.substr(8);  // the HyperPod launcher's root: the recipe itself
    }
    if (!rest.empty()) {
      for (const std::string& p : SplitDots(rest)) target.push_back(p);
    }
    const YAML::Node found = Get(target);
    if (!found.IsDefined()) {
      return InvalidArgument(fmt::format("{}: ${{{}}}: there is no key '{}' in the config{}", key, expr,
                                         Join(target),
                                         target.size() == 1 ? fmt::format(" (give it with --set {}=...)", target[0])
                                                            : std::string()));
    }
    HT_RETURN_IF_ERROR(ResolveTree(target));
    const YAML::Node resolved = Get(target);
    HT_RETURN_IF_ERROR(Spend(key, "${" + expr + "}", TreeSize(resolved, kMaxResolvedBytes)));
    return YAML::Clone(resolved);
  }

  StatusOr<YAML::Node> EnvValue(const Path& path, const std::string& args) {
    const size_t comma = args.find(',');
    const std::string var = Trim(args.substr(0, comma));
    if (var.empty()) return InvalidArgument(fmt::format("{}: ${{oc.env:}} names no variable", Join(path)));
    if (const char* v = env_ ? env_(var.c_str()) : nullptr; v != nullptr) return YAML::Node(std::string(v));
    if (comma == std::string::npos) {
      return InvalidArgument(fmt::format("{}: ${{oc.env:{}}}: the environment variable {} is not set (and no "
                                         "default is given: ${{oc.env:{},default}})",
                                         Join(path), var, var, var));
    }
    const std::string dflt = Trim(args.substr(comma + 1));
    if (dflt == "null") return YAML::Node(YAML::NodeType::Null);
    if (dflt.find("${") != std::string::npos) return Evaluate(path, dflt);
    if (dflt.size() >= 2 && (dflt.front() == '\'' || dflt.front() == '"') && dflt.back() == dflt.front()) {
      return YAML::Node(dflt.substr(1, dflt.size() - 2));
    }
    return YAML::Node(dflt);
  }

  YAML::Node root_;
  EnvLookup env_;
  std::vector<std::string> stack_;
  int64_t produced_ = 0;
};

}  // namespace

Status ResolveInterpolations(YAML::Node& root, const EnvLookup& env) {
  // The document's bounds first: nothing below walks an unbounded tree.
  HT_RETURN_IF_ERROR(DocumentCheck().Walk(root, "", 0));
  if (!root.IsMap()) return Status::Ok();
  Resolver r(root, env);
  return r.ResolveTree({});
}

}  // namespace hypertrain::config
