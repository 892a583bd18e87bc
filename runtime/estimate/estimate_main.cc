// hypertrain estimate: parameters, FLOPs, memory per GPU, fit, speed and cost
// of a training config, without running it.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/cli.h"
#include "runtime/estimate/estimate.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::estimate {
namespace {

struct EstimateFlags {
  std::string config_path, instance_name, tokens_text, mfu_text, peak_text;
  std::vector<std::string> sets;
  int64_t nodes = 0, gpus_per_node = 0;  // 0: from the config (Layout)
  bool json = false;
};

int Fail(const std::string& message) {
  spdlog::error("hypertrain estimate: {}", message);
  return train::kExitConfigError;
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
  // Where the data lives changes nothing here: a recipe without its data
  // directory (HyperPod supplies it at launch) is still estimated.
  sets.insert(sets.begin(), "model.data.use_synthetic_data=true");
  auto config = config::LoadTrainConfig(config_path, sets);
  if (!config.ok()) return Fail("config error: " + config.status().message());
  const contract::InstanceType* instance = options.instance ? &*options.instance : nullptr;
  auto run = RunShapeFromConfig(*config, layout, instance);
  if (!run.ok()) return Fail("config error: " + run.status().message());
  std::string error;
  const std::optional<contract::Estimate> e = contract::MakeEstimate(*run, options, &error);
  if (!e) return Fail(error);
  const std::vector<std::string> notes = ConfigNotes(*config, *run, instance);
  const std::string out = f.json ? EstimateToJson(*e, notes) : FormatEstimate(*e, notes, config_path);
  std::fputs(out.c_str(), stdout);
  return train::kExitOk;
}

}  // namespace

std::function<int()> AddEstimateFlags(CLI::App& app) {
  app.footer(
      "Predicts, for the config's model and parallel layout: parameters (embedding, blocks, head),\n"
      "FLOPs per token (the trainer's MFU convention and Megatron's), memory per GPU by part for every\n"
      "sharding strategy, whether it fits the instance's GPUs (every GPU model when no\n"
      "--instance-type), tokens/s from a measured MFU (docs/PERF.md, or --mfu), and days and GPU-hours\n"
      "for --tokens.");
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
  app.add_flag("--json", f->json, "The estimate as JSON (the TrainingJob's status.estimate)");
  return [f] { return RunEstimate(*f); };
}

}  // namespace hypertrain::estimate
