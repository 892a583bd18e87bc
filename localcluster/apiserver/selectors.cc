#include "localcluster/apiserver/selectors.h"

#include <cctype>

namespace kubelocal {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits on commas that are not inside parentheses.
StatusOr<std::vector<std::string>> SplitTopLevel(const std::string& text) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth < 0) return BadRequest("unable to parse requirement: unbalanced ')' in " + text);
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) return BadRequest("unable to parse requirement: unbalanced '(' in " + text);
  out.push_back(cur);
  return out;
}

bool ValidLabelKey(const std::string& k) {
  if (k.empty() || k.size() > 316) return false;
  for (char c : k) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '/'))
      return false;
  }
  return true;
}

bool ValidLabelValue(const std::string& v) {
  if (v.size() > 63) return false;
  for (char c : v) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  }
  return true;
}

}  // namespace

std::string FieldValueAt(const json& object, const std::string& dotted_path) {
  const json* cur = &object;
  size_t pos = 0;
  while (pos <= dotted_path.size()) {
    size_t dot = dotted_path.find('.', pos);
    std::string part = dotted_path.substr(pos, dot == std::string::npos ? std::string::npos
                                                                        : dot - pos);
    if (!cur->is_object() || !cur->contains(part)) return "";
    cur = &(*cur)[part];
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_null()) return "";
  return cur->dump();
}

StatusOr<LabelSelector> LabelSelector::Parse(const std::string& text) {
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  auto parts = SplitTopLevel(text);
  if (!parts.ok()) return parts.status();
  for (const auto& raw : *parts) {
    std::string p = Trim(raw);
    if (p.empty()) return BadRequest("unable to parse requirement: empty requirement in \"" + text + "\"");
    Requirement r;
    auto paren = p.find('(');
    if (paren != std::string::npos) {
      // key in (a,b) / key notin (a,b)
      if (p.back() != ')') return BadRequest("unable to parse requirement: " + p);
      std::string head = Trim(p.substr(0, paren));
      auto sp = head.find_last_of(" \t");
      if (sp == std::string::npos) return BadRequest("unable to parse requirement: " + p);
      std::string op = Trim(head.substr(sp + 1));
      r.key = Trim(head.substr(0, sp));
      if (op == "in") {
        r.op = Op::kIn;
      } else if (op == "notin") {
        r.op = Op::kNotIn;
      } else {
        return BadRequest("unable to parse requirement: unknown operator \"" + op + "\"");
      }
      std::string inner = p.substr(paren + 1, p.size() - paren - 2);
      size_t pos = 0;
      while (true) {
        size_t c = inner.find(',', pos);
        std::string v = Trim(inner.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
        if (!ValidLabelValue(v)) return BadRequest("invalid label value: \"" + v + "\"");
        if (!v.empty() || inner.find_first_not_of(" \t") != std::string::npos) r.values.push_back(v);
        if (c == std::string::npos) break;
        pos = c + 1;
      }
      if (r.values.empty()) return BadRequest("unable to parse requirement: empty set in " + p);
    } else if (auto ne = p.find("!="); ne != std::string::npos) {
      r.key = Trim(p.substr(0, ne));
      r.op = Op::kNotEquals;
      r.values.push_back(Trim(p.substr(ne + 2)));
    } else if (auto eq2 = p.find("=="); eq2 != std::string::npos) {
      r.key = Trim(p.substr(0, eq2));
      r.op = Op::kEquals;
      r.values.push_back(Trim(p.substr(eq2 + 2)));
    } else if (auto eq = p.find('='); eq != std::string::npos) {
      r.key = Trim(p.substr(0, eq));
      r.op = Op::kEquals;
      r.values.push_back(Trim(p.substr(eq + 1)));
    } else if (p[0] == '!') {
      r.key = Trim(p.substr(1));
      r.op = Op::kDoesNotExist;
    } else {
      r.key = p;
      r.op = Op::kExists;
    }
    if (!ValidLabelKey(r.key)) return BadRequest("invalid label key \"" + r.key + "\"");
    for (const auto& v : r.values) {
      if (!ValidLabelValue(v)) return BadRequest("invalid label value: \"" + v + "\"");
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

bool LabelSelector::Matches(const json& object) const {
  static const json kEmpty = json::object();
  const json* labels = &kEmpty;
  if (object.contains("metadata") && object["metadata"].contains("labels") &&
      object["metadata"]["labels"].is_object()) {
    labels = &object["metadata"]["labels"];
  }
  for (const auto& r : reqs_) {
    bool has = labels->contains(r.key);
    std::string val = has && (*labels)[r.key].is_string() ? (*labels)[r.key].get<std::string>() : "";
    auto in_values = [&] {
      for (const auto& v : r.values)
        if (v == val) return true;
      return false;
    };
    switch (r.op) {
      case Op::kEquals:
      case Op::kIn:
        if (!has || !in_values()) return false;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (has && in_values()) return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

StatusOr<FieldSelector> FieldSelector::Parse(const std::string& text) {
  FieldSelector sel;
  if (Trim(text).empty()) return sel;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t c = text.find(',', pos);
    std::string p = Trim(text.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    Requirement r;
    if (auto ne = p.find("!="); ne != std::string::npos) {
      r.field = Trim(p.substr(0, ne));
      r.equals = false;
      r.value = Trim(p.substr(ne + 2));
    } else if (auto eq2 = p.find("=="); eq2 != std::string::npos) {
      r.field = Trim(p.substr(0, eq2));
      r.equals = true;
      r.value = Trim(p.substr(eq2 + 2));
    } else if (auto eq = p.find('='); eq != std::string::npos) {
      r.field = Trim(p.substr(0, eq));
      r.equals = true;
      r.value = Trim(p.substr(eq + 1));
    } else {
      return BadRequest("invalid selector: '" + text + "'; can't understand '" + p + "'");
    }
    if (r.field.empty()) return BadRequest("invalid field selector: empty field in '" + text + "'");
    sel.reqs_.push_back(std::move(r));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return sel;
}

Status FieldSelector::CheckAllowed(const std::vector<std::string>& allowed,
                                   const std::string& kind) const {
  for (const auto& r : reqs_) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == r.field;
    if (!ok) {
      return BadRequest("field label not supported: " + r.field + " (kind " + kind + ")");
    }
  }
  return Status();
}

bool FieldSelector::Matches(const json& object) const {
  for (const auto& r : reqs_) {
    bool eq = FieldValueAt(object, r.field) == r.value;
    if (eq != r.equals) return false;
  }
  return true;
}

}  // namespace kubelocal
