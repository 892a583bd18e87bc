// spec.elastic: the size range, its intervals, and the sizes on which the
// trainer can keep the global batch (contract/elastic.h).
#include <algorithm>
#include <map>

#include "contract/elastic.h"
#include "contract/sharding.h"
#include "operator/api/parse_util.h"
#include "operator/api/spec_parts.h"

namespace hypertrain::api {

int32_t Elastic::LargestSizeAtMost(int64_t n) const {
  int32_t best = 0;
  for (int32_t size : sizes) {
    if (size <= n) best = size;
  }
  return best;
}

namespace parse {
namespace {

std::string List(const std::vector<int32_t>& sizes) {
  std::string out;
  for (int32_t n : sizes) out += (out.empty() ? "" : ", ") + std::to_string(n);
  return out.empty() ? "none" : out;
}

}  // namespace

std::optional<Elastic> ParseElastic(const json* v, const std::string& path, const TrainingJobSpec& s) {
  if (!v) return std::nullopt;
  RequireObject(*v, path);
  for (auto it = v->begin(); it != v->end(); ++it) {
    static const std::vector<std::string> kKnown = {"minNodes", "maxNodes", "checkIntervalSeconds",
                                                    "minResizeIntervalSeconds"};
    if (std::find(kKnown.begin(), kKnown.end(), it.key()) == kKnown.end()) {
      Fail(Join(path, it.key()), "unknown field (expected one of minNodes, maxNodes, checkIntervalSeconds, "
                                 "minResizeIntervalSeconds)");
    }
  }
  Elastic e;
  const std::optional<int64_t> min = OptInt(*v, "minNodes", path, 1, 2048);
  if (!min) Fail(Join(path, "minNodes"), "required: the fewest nodes the job may run on");
  if (*min > s.nodes) {
    Fail(Join(path, "minNodes"), std::to_string(*min) + " exceeds spec.nodes " + std::to_string(s.nodes));
  }
  e.min_nodes = static_cast<int32_t>(*min);
  e.max_nodes = static_cast<int32_t>(OptInt(*v, "maxNodes", path, 1, 2048).value_or(s.nodes));
  if (e.max_nodes < s.nodes) {
    Fail(Join(path, "maxNodes"), std::to_string(e.max_nodes) + " is less than spec.nodes " + std::to_string(s.nodes) +
                                     " (the desired size)");
  }
  e.check_interval_seconds =
      static_cast<int32_t>(OptInt(*v, "checkIntervalSeconds", path, 1, 86400).value_or(e.check_interval_seconds));
  e.min_resize_interval_seconds = static_cast<int32_t>(
      OptInt(*v, "minResizeIntervalSeconds", path, 0, 604800).value_or(e.min_resize_interval_seconds));
  if (s.run_policy.scheduling_timeout_seconds <= 0) {
    Fail(path, "needs spec.runPolicy.schedulingTimeoutSeconds: the job shrinks when a gang is not all Running "
               "within it");
  }

  // Which sizes keep the global batch: the inline config says how; a config in
  // a ConfigMap is not read by the operator, so its defaults are assumed.
  const std::optional<TrainerConfigSummary>& summary = s.trainer_config.summary;
  const int64_t accum = summary ? summary->grad_accumulation_steps : 1;
  const contract::ShardingStrategy strategy =
      summary ? contract::ParseShardingStrategy(summary->sharding_strategy).value_or(contract::kDefaultShardingStrategy)
              : contract::kDefaultShardingStrategy;
  const int64_t degree = summary ? summary->requested_shard_degree : 0;
  std::map<int32_t, std::string> problems;
  for (int32_t n = e.min_nodes; n <= e.max_nodes; ++n) {
    std::string why = contract::ElasticSizeProblem(accum, s.nodes, n, strategy, degree, s.nproc_per_node);
    if (why.empty()) {
      e.sizes.push_back(n);
    } else {
      problems[n] = why;
    }
  }
  const std::string assumed =
      summary ? "" : " (the trainer config is in a ConfigMap the operator does not read: it assumes "
                     "grad_accumulation_steps 1 and a shard group within a node)";
  for (const auto& [key, n] : {std::pair{"minNodes", e.min_nodes}, std::pair{"maxNodes", e.max_nodes}}) {
    if (!problems.count(n)) continue;
    Fail(Join(path, key), std::to_string(n) + " nodes cannot keep the global batch of spec.nodes " +
                              std::to_string(s.nodes) + ": " + problems[n] + "; sizes that can: " + List(e.sizes) +
                              assumed);
  }
  return e;
}

}  // namespace parse
}  // namespace hypertrain::api
