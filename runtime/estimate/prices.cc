#include "runtime/estimate/prices.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

namespace hypertrain::estimate {

const PriceTable& DefaultPrices() {
  // The On-Demand Linux price of the same EC2 instance in US East (N.
  // Virginia), from aws.amazon.com/ec2/pricing/on-demand/ as listed in 2024,
  // before AWS's June 2025 P4/P5 price reduction. SageMaker ml.* training and
  // HyperPod rates, other regions, reservations and savings plans differ:
  // override them.
  static const PriceTable kTable{
      {
          {"ml.g5.48xlarge", 16.288},
          {"ml.g6.48xlarge", 13.3504},
          {"ml.g6e.48xlarge", 30.1311},
          {"ml.p4d.24xlarge", 32.7726},
          {"ml.p4de.24xlarge", 40.9657},
          {"ml.p5.48xlarge", 98.32},
      },
      "EC2 On-Demand Linux, us-east-1, 2024 list price (before the June 2025 P4/P5 reduction); "
      "not a SageMaker quote: override with --prices or --price-per-hour"};
  return kTable;
}

StatusOr<PriceTable> LoadPrices(const std::string& path, const PriceTable& defaults) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("--prices {}: {}", path, e.what()));
  }
  if (!root.IsMap() || !root["prices"] || !root["prices"].IsMap()) {
    return InvalidArgument(fmt::format("--prices {}: expected a map with prices: {{<instance type>: <USD per "
                                       "instance-hour>, ...}} and optionally source: <text>",
                                       path));
  }
  PriceTable t = defaults;
  t.source = fmt::format("{} ({})", root["source"] && root["source"].IsScalar() ? root["source"].Scalar() : "no source given", path);
  for (auto it = root["prices"].begin(); it != root["prices"].end(); ++it) {
    const std::string type = it->first.Scalar();
    double usd = -1;
    try {
      usd = it->second.as<double>();
    } catch (const YAML::Exception&) {
    }
    if (!(usd > 0) || !std::isfinite(usd)) {
      return InvalidArgument(fmt::format("--prices {}: prices.{}: expected a positive number of USD per "
                                         "instance-hour, got '{}'",
                                         path, type, it->second.IsScalar() ? it->second.Scalar() : "a non-scalar"));
    }
    t.usd_per_hour[type] = usd;
  }
  return t;
}

}  // namespace hypertrain::estimate
