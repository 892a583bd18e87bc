// Known keys and suggestions for unknown ones (runtime/config/reader.h).
#include <algorithm>
#include <sstream>

#include "runtime/config/reader.h"

namespace hypertrain::config::internal {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  std::string p;
  while (std::getline(ss, p, '.')) parts.push_back(p);
  return parts;
}

YAML::Node Lookup(const YAML::Node& root, const std::string& path) {
  YAML::Node n;
  n.reset(root);
  for (const std::string& part : SplitPath(path)) {
    if (!n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& cn = n;
    YAML::Node child = cn[part];
    if (!child.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(child);
  }
  return n;
}

const std::vector<std::string>& BookkeepingKeys() {
  // Each is either the launcher's own (run.*, base_results_dir, cluster
  // settings), a Python-side implementation detail with no counterpart here
  // (SMP, FSDP wrapping and prefetch policies: hypertrain's HSDP always
  // prefetches the next unit), or informational.
  static const std::vector<std::string> kKeys = {
      "run.*",
      "base_results_dir",
      "container",
      "cluster_type",
      "cluster.*",
      "git.*",
      "env_vars.*",
      "instance_type",
      "use_smp_model",
      "distributed_backend",
      "trainer.accelerator",
      "exp_manager.name",
      "model.log_reduced_training_loss",
      "model.activation_loading_horizon",
      "model.delayed_param",
      "model.use_flash_attention",
      "model.hf_access_token",
      "model.forward_prefetch",
      "model.backward_fetch_policy",
      "model.auto_wrap_policy",
      "model.limit_all_gathers",
      "model.use_orig_param",
  };
  return kKeys;
}

namespace {

bool Matches(const std::string& pattern, const std::string& path) {
  if (pattern == path) return true;
  if (pattern.size() > 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0) {
    const std::string base = pattern.substr(0, pattern.size() - 2);
    return path == base || path.rfind(base + ".", 0) == 0;
  }
  return false;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string LastSegment(const std::string& p) {
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? p : p.substr(dot + 1);
}

}  // namespace

bool IsKnownKey(const std::string& path, const std::set<std::string>& read) {
  for (const std::string& r : read) {
    if (Matches(r, path)) return true;
  }
  for (const std::string& k : BookkeepingKeys()) {
    if (Matches(k, path)) return true;
  }
  return false;
}

std::string SuggestKey(const std::string& unknown, const std::set<std::string>& read) {
  std::vector<std::string> candidates;
  for (const std::string& r : read) {
    if (r.find('*') == std::string::npos) candidates.push_back(r);
  }
  for (const std::string& k : BookkeepingKeys()) {
    if (k.find('*') == std::string::npos) candidates.push_back(k);
  }
  std::string best;
  size_t best_d = std::string::npos;
  const size_t limit = std::max<size_t>(2, unknown.size() / 5);
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(unknown, c);
    if (d <= limit && d < best_d) {
      best = c;
      best_d = d;
    }
  }
  if (!best.empty()) return best;
  // The right name in another section (trainer.seed -> model.seed).
  const std::string leaf = LastSegment(unknown);
  for (const std::string& c : candidates) {
    const std::string cl = LastSegment(c);
    if (cl == leaf || (leaf.size() > 4 && EditDistance(leaf, cl) <= 1)) return c;
  }
  return "";
}

}  // namespace hypertrain::config::internal
