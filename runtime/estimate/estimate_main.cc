// hypertrain estimate: parameters, FLOPs, memory per GPU, fit, speed and cost
// of a training config, without running it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/cli.h"
#include "runtime/estimate/estimate.h"
#include "contract/exit_codes.h"

namespace hypertrain::estimate {
namespace {

struct EstimateFlags {
  std::string config_path, instance_name, tokens_text, mfu_text, peak_text, prices_path, price_text;
  std::vector<std::string> sets;
  int64_t nodes = 0, gpus_per_node = 0;  // 0: from the config (Layout)
  bool json = false;
};

int Fail(const std::string& message) {
  spdlog::error("hypertrain estimate: {}", message);
  return contract::kExitConfigError;
}

// The config as the trainer would read it, made estimable: synthetic data
// (where the data lives changes nothing here; HyperPod supplies train_dir at
// launch), placeholders for the launcher's base_results_dir and a fine-tuning
// recipe's hf_model_name_or_path (nothing is read or written), and
// parallelism the trainer refuses read as degree 1 with a note.
StatusOr<config::TrainConfig> LoadForEstimate(const std::string& path, std::vector<std::string> sets,
                                              std::vector<std::string>* notes) {
  sets.insert(sets.begin(), "model.data.use_synthetic_data=true");
  bool has_base = false;
  for (const std::string& s : sets) has_base = has_base || s.rfind("base_results_dir=", 0) == 0;
  if (!has_base) sets.insert(sets.begin(), "base_results_dir=/hypertrain-estimate");
  for (int attempt = 0;; ++attempt) {
    auto config = config::LoadTrainConfig(path, sets);
    if (config.ok() || attempt == 4) return config;
    const std::string& msg = config.status().message();
    bool retried = false;
    for (const char* key : {"model.tensor_model_parallel_degree", "model.context_parallel_degree",
                            "model.expert_model_parallel_degree"}) {
      if (msg.rfind(std::string(key) + ": ", 0) != 0) continue;
      notes->push_back(msg.substr(0, msg.find("; supported:")) +
                       ": estimated with degree 1 (data-parallel hybrid sharding over every GPU), which the "
                       "trainer needs set (--set " + key + "=1)");
      sets.push_back(std::string(key) + "=1");
      retried = true;
    }
    // The base's weights are not read: a fine-tuning recipe without the path
    // HyperPod supplies is estimated like one with it.
    if (!retried && msg.rfind("model.do_finetune: true needs model.hf_model_name_or_path", 0) == 0) {
      sets.push_back("model.hf_model_name_or_path=/hypertrain-estimate/base");
      retried = true;
    }
    if (!retried) return config;
  }
}

// The cost line: the instance's price from --price-per-hour, else --prices,
// else the built-in table (prices.h). None without --instance-type (a note).
StatusOr<std::optional<Cost>> CostFor(const EstimateFlags& f, const contract::Estimate& e,
                                      const contract::InstanceType* instance, std::vector<std::string>* notes) {
  PriceTable prices = DefaultPrices();
  if (!f.prices_path.empty()) {
    HT_ASSIGN_OR_RETURN(prices, LoadPrices(f.prices_path, prices));
  }
  if (instance == nullptr) {
    if (!f.price_text.empty()) return InvalidArgument("--price-per-hour needs --instance-type");
    notes->push_back("cost: give --instance-type for the cost in dollars");
    return std::optional<Cost>();
  }
  Cost c;
  c.instance = instance->name;
  c.nodes = e.run.nodes;
  if (e.tokens) c.seconds = e.seconds;
  if (!f.price_text.empty()) {
    char* end = nullptr;
    c.usd_per_hour = std::strtod(f.price_text.c_str(), &end);
    if (*end != '\0' || !(c.usd_per_hour > 0) || !std::isfinite(c.usd_per_hour)) {
      return InvalidArgument("--price-per-hour: expected a positive number of USD per instance-hour, got '" +
                             f.price_text + "'");
    }
    c.source = "--price-per-hour";
    return std::optional<Cost>(c);
  }
  const auto it = prices.usd_per_hour.find(instance->name);
  if (it == prices.usd_per_hour.end()) {
    notes->push_back("cost: no price for " + instance->name + " in the price table; give --price-per-hour or --prices");
    return std::optional<Cost>();
  }
  c.usd_per_hour = it->second;
  c.source = prices.source;
  return std::optional<Cost>(c);
}

int RunEstimate(const EstimateFlags& f) {
  Layout layout;
  layout.nodes = f.nodes;
  layout.gpus_per_node = f.gpus_per_node;
  const std::string& config_path = f.config_path;
  const std::string& instance_name = f.instance_name;
  const std::string& tokens_text = f.tokens_text;
  const std::string& mfu_text = f.mfu_text;
  const std::string& peak_text = f.peak_text;
  std::vector<std::string> sets = f.sets;
  contract::EstimateOptions options;
  if (!instance_name.empty()) {
    options.instance = contract::LookupInstanceType(instance_name);
    if (!options.instance) {
      std::string known;
      for (const auto& t : contract::KnownInstanceTypes()) known += (known.empty() ? "" : ", ") + t.name;
      return Fail("--instance-type: unknown '" + instance_name + "'; known: " + known);
    }
  }
  if (!tokens_text.empty()) {
    options.tokens = contract::ParseTokenCount(tokens_text);
    if (!options.tokens) return Fail("--tokens: expected a positive count like 1T, 300B, 2.5e12; got '" + tokens_text + "'");
  }
  if (!mfu_text.empty()) {
    char* end = nullptr;
    const double mfu = std::strtod(mfu_text.c_str(), &end);
    if (*end != '\0' || !(mfu > 0 && mfu <= 1)) {
      return Fail("--mfu: expected a fraction in (0, 1], e.g. 0.45; got '" + mfu_text + "'");
    }
    options.mfu = mfu;
  }
  if (!peak_text.empty()) {
    char* end = nullptr;
    options.peak_tflops = std::strtod(peak_text.c_str(), &end);
    if (*end != '\0' || !(options.peak_tflops > 0)) {
      return Fail("--peak-tflops: expected a positive number, got '" + peak_text + "'");
    }
  }
  std::vector<std::string> notes;
  auto config = LoadForEstimate(config_path, sets, &notes);
  if (!config.ok()) return Fail("config error: " + config.status().message());
  const contract::InstanceType* instance = options.instance ? &*options.instance : nullptr;
  auto run = RunShapeFromConfig(*config, layout, instance);
  if (!run.ok()) return Fail("config error: " + run.status().message());
  std::string error;
  const std::optional<contract::Estimate> e = contract::MakeEstimate(*run, options, &error);
  if (!e) return Fail(error);
  for (std::string& n : ConfigNotes(*config, *run, instance)) notes.push_back(std::move(n));
  auto cost = CostFor(f, *e, instance, &notes);
  if (!cost.ok()) return Fail(cost.status().message());
  const Cost* c = cost->has_value() ? &**cost : nullptr;
  const std::string out = f.json ? EstimateToJson(*e, notes, c) : FormatEstimate(*e, notes, config_path, c);
  std::fputs(out.c_str(), stdout);
  return contract::kExitOk;
}

}  // namespace

std::function<int()> AddEstimateFlags(CLI::App& app) {
  app.footer(
      "Predicts, for the config's model and parallel layout: parameters (embedding, blocks, head),\n"
      "FLOPs per token (the trainer's MFU convention and Megatron's), memory per GPU by part for every\n"
      "sharding strategy, whether it fits the instance's GPUs (every GPU model when no\n"
      "--instance-type), tokens/s from a measured MFU (docs/PERF.md, or --mfu), days and GPU-hours\n"
      "for --tokens, and the cost in dollars for --instance-type from a built-in price table (EC2\n"
      "On-Demand us-east-1, 2024 list prices: see docs/TRAINER.md) or --prices / --price-per-hour.");
  auto f = std::make_shared<EstimateFlags>();
  app.add_option("--config", f->config_path, "The job's YAML")->type_name("FILE")->required();
  app.add_option("--set", f->sets, "Override one config key (repeatable, applied in order)")
      ->type_name("KEY.PATH=VALUE")
      ->allow_extra_args(false);
  app.add_option("--nodes", f->nodes, "Nodes")
      ->type_name("N")
      ->check(cli::IntRange(1))
      ->default_str("trainer.num_nodes");
  app.add_option("--gpus-per-node", f->gpus_per_node, "GPUs per node")
      ->type_name("G")
      ->check(cli::IntRange(1))
      ->default_str("the instance's, else trainer.devices");
  app.add_option("--instance-type", f->instance_name, "e.g. ml.p5.48xlarge (default: every GPU model)")
      ->type_name("TYPE");
  app.add_option("--tokens", f->tokens_text, "Training tokens for the budget, with K, M, B (or G) or T, e.g. 1T")
      ->type_name("COUNT");
  app.add_option("--mfu", f->mfu_text, "Model FLOPs utilisation in (0, 1] (default: measured, docs/PERF.md)")
      ->type_name("FRACTION");
  app.add_option("--peak-tflops", f->peak_text, "Dense bf16 peak per GPU (default: the GPU's datasheet)")
      ->type_name("TFLOPS");
  app.add_option("--prices", f->prices_path,
                 "YAML price table {source: TEXT, prices: {TYPE: USD per instance-hour}} over the built-in one")
      ->type_name("FILE");
  app.add_option("--price-per-hour", f->price_text, "USD per instance-hour of --instance-type (wins over tables)")
      ->type_name("USD");
  app.add_flag("--json", f->json, "The estimate as JSON (the TrainingJob's status.estimate)");
  return [f] { return RunEstimate(*f); };
}

}  // namespace hypertrain::estimate
