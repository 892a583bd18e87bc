// hypertrain estimate: parameters, FLOPs, memory per GPU, fit, speed and cost
// of a training config, without running it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "runtime/estimate/estimate.h"
#include "runtime/train/exit_codes.h"

namespace hypertrain::estimate {
namespace {

constexpr char kUsage[] =
    "usage: hypertrain estimate --config job.yaml [--set key=value ...]\n"
    "                           [--nodes N] [--gpus-per-node G] [--instance-type ml.p5.48xlarge]\n"
    "                           [--tokens 1T] [--mfu 0.45] [--peak-tflops 989.4] [--json]\n"
    "  Predicts, for the config's model and parallel layout: parameters (embedding,\n"
    "  blocks, head), FLOPs per token (the trainer's MFU convention and Megatron's),\n"
    "  memory per GPU by part for every sharding strategy, whether it fits the\n"
    "  instance's GPUs (every GPU model when no --instance-type), tokens/s from a\n"
    "  measured MFU (docs/PERF.md, or --mfu), and days and GPU-hours for --tokens.\n"
    "  --nodes / --gpus-per-node default to trainer.num_nodes and the instance's\n"
    "  GPUs (else trainer.devices). --tokens takes K, M, B (or G) and T suffixes.\n";

bool Flag(int argc, char** argv, int* i, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(argv[*i], name, n) != 0) return false;
  if (argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
    return true;
  }
  if (argv[*i][n] != '\0' || *i + 1 >= argc) return false;
  *value = argv[++*i];
  return true;
}

int Fail(const std::string& message) {
  spdlog::error("hypertrain estimate: {}", message);
  return train::kExitConfigError;
}

// A positive integer flag value, or -1.
int64_t PositiveInt(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0' && v > 0 ? v : -1;
}

}  // namespace

int EstimateMain(int argc, char** argv) {
  std::string config_path, instance_name, tokens_text, mfu_text, peak_text, nodes_text, gpus_text;
  std::vector<std::string> sets;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return train::kExitOk;
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (Flag(argc, argv, &i, "--config", &v)) {
      config_path = v;
    } else if (Flag(argc, argv, &i, "--set", &v)) {
      sets.push_back(v);
    } else if (Flag(argc, argv, &i, "--instance-type", &v)) {
      instance_name = v;
    } else if (Flag(argc, argv, &i, "--tokens", &v)) {
      tokens_text = v;
    } else if (Flag(argc, argv, &i, "--mfu", &v)) {
      mfu_text = v;
    } else if (Flag(argc, argv, &i, "--peak-tflops", &v)) {
      peak_text = v;
    } else if (Flag(argc, argv, &i, "--nodes", &v)) {
      nodes_text = v;
    } else if (Flag(argc, argv, &i, "--gpus-per-node", &v)) {
      gpus_text = v;
    } else {
      spdlog::error("hypertrain estimate: unexpected argument '{}'", argv[i]);
      std::fputs(kUsage, stderr);
      return train::kExitConfigError;
    }
  }
  if (config_path.empty()) {
    spdlog::error("hypertrain estimate: --config is required");
    std::fputs(kUsage, stderr);
    return train::kExitConfigError;
  }
  Layout layout;
  if (!nodes_text.empty() && (layout.nodes = PositiveInt(nodes_text)) < 0) {
    return Fail("--nodes must be a positive integer, got '" + nodes_text + "'");
  }
  if (!gpus_text.empty() && (layout.gpus_per_node = PositiveInt(gpus_text)) < 0) {
    return Fail("--gpus-per-node must be a positive integer, got '" + gpus_text + "'");
  }
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
  const std::string out = json ? EstimateToJson(*e, notes) : FormatEstimate(*e, notes, config_path);
  std::fputs(out.c_str(), stdout);
  return train::kExitOk;
}

}  // namespace hypertrain::estimate
