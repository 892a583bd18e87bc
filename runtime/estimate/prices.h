#pragma once
// Instance prices for `hypertrain estimate`'s cost line: USD per instance-hour
// by instance type, with where the figures come from. The built-in table
// (DefaultPrices) is dated reference data, not a quote: --prices FILE and
// --price-per-hour override it (docs/TRAINER.md "Estimating a run").
//
// A --prices file is YAML:
//   source: "our 2026 HyperPod reservation"     # printed with the cost
//   prices: {ml.p5.48xlarge: 61.5, ml.p4d.24xlarge: 24.0}
// Its entries replace the built-in ones of the same type; the rest stay.
#include <map>
#include <optional>
#include <string>

#include "core/status.h"

namespace hypertrain::estimate {

struct PriceTable {
  std::map<std::string, double> usd_per_hour;  // per instance (not per GPU)
  std::string source;
};

const PriceTable& DefaultPrices();

// `defaults` with the file's entries over it; the file's source replaces the
// source of the entries it gives. InvalidArgument naming the file and key.
StatusOr<PriceTable> LoadPrices(const std::string& path, const PriceTable& defaults);

// The cost line's numbers: `nodes` instances for `seconds`.
struct Cost {
  std::string instance;
  double usd_per_hour = 0;  // one instance
  std::string source;
  int64_t nodes = 0;
  std::optional<double> seconds;  // the --tokens budget's duration, when given
  double usd_per_hour_all() const { return usd_per_hour * static_cast<double>(nodes); }
  std::optional<double> usd() const {
    if (!seconds) return std::nullopt;
    return usd_per_hour_all() * *seconds / 3600.0;
  }
};

}  // namespace hypertrain::estimate
