#include "runtime/model/peft.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hypertrain::model {
namespace {

struct Module {
  int tensor;
  const char* name;
  const char* short_name;
};
constexpr Module kModules[] = {
    {kQProj, "q_proj", "q"},          {kKProj, "k_proj", "k"},   {kVProj, "v_proj", "v"},
    {kOProj, "o_proj", "o"},          {kGateProj, "gate_proj", "gate"},
    {kUpProj, "up_proj", "up"},       {kDownProj, "down_proj", "down"},
};

}  // namespace

const char* PeftTypeName(PeftType t) {
  switch (t) {
    case PeftType::kNone: return "none";
    case PeftType::kLora: return "lora";
    case PeftType::kQlora: return "qlora";
  }
  return "?";
}

StatusOr<PeftType> ParsePeftType(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l.empty() || l == "none" || l == "null") return PeftType::kNone;
  if (l == "lora") return PeftType::kLora;
  if (l == "qlora") return PeftType::kQlora;
  return InvalidArgument(fmt::format("model.peft.peft_type: '{}' is not one of lora, qlora, none", s));
}

StatusOr<int> ParseTargetModule(const std::string& s) {
  for (const Module& m : kModules) {
    if (s == m.name || s == m.short_name) return m.tensor;
  }
  return InvalidArgument(fmt::format(
      "model.peft.target_modules: '{}' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, "
      "up_proj, down_proj",
      s));
}

const char* TargetModuleName(int t) {
  for (const Module& m : kModules) {
    if (m.tensor == t) return m.name;
  }
  return "?";
}

Status PeftOptions::Validate() const {
  if (!enabled()) return Status::Ok();
  if (rank < 1) return InvalidArgument(fmt::format("model.peft.rank: {} must be >= 1", rank));
  if (!(alpha > 0) || !std::isfinite(alpha)) {
    return InvalidArgument(fmt::format("model.peft.alpha: {} must be > 0", alpha));
  }
  if (!(dropout >= 0 && dropout < 1)) {
    return InvalidArgument(fmt::format("model.peft.dropout: {} must be in [0, 1)", dropout));
  }
  if (targets.empty()) return InvalidArgument("model.peft.target_modules: empty");
  for (size_t i = 0; i < targets.size(); ++i) {
    if (std::string(TargetModuleName(targets[i])) == "?" || (i > 0 && targets[i] <= targets[i - 1])) {
      return InvalidArgument("model.peft.target_modules: must be distinct projections");
    }
  }
  return Status::Ok();
}

std::string PeftOptions::Summary() const {
  std::string t;
  for (int x : targets) t += (t.empty() ? "" : ",") + std::string(TargetModuleName(x));
  return fmt::format("{} rank {}, alpha {} (scaling {:.4g}), dropout {}, targets {}{}",
                     PeftTypeName(type), rank, alpha, scaling(), dropout, t,
                     !fp8_base         ? ""
                     : quantized() ? ", frozen GEMMs in FP8 (NF4 dequantised to e4m3, a scale per weight)"
                                   : ", frozen base in FP8 (e4m3, a scale per weight)");
}

AdapterSlots AdapterSlots::For(const std::vector<int>& targets) {
  AdapterSlots s;
  std::fill(std::begin(s.lora_a), std::end(s.lora_a), -1);
  std::fill(std::begin(s.lora_b), std::end(s.lora_b), -1);
  int next = 0;
  for (int t : targets) {
    s.lora_a[t] = next++;
    s.lora_b[t] = next++;
  }
  return s;
}

StatusOr<double> PeftTrainFlopsPerToken(const ModelConfig& config, const PeftOptions& options, int64_t seq) {
  HT_ASSIGN_OR_RETURN(ParamLayout adapters, BuildAdapterLayout(config, options));
  return 4.0 * static_cast<double>(config.NumMatmulParams()) +
         6.0 * static_cast<double>(adapters.total_param_numel()) +
         12.0 * static_cast<double>(config.num_hidden_layers) * config.hidden_size * static_cast<double>(seq);
}

StatusOr<ParamLayout> BuildAdapterLayout(const ModelConfig& config, const PeftOptions& options,
                                         const LayoutOptions& layout) {
  HT_RETURN_IF_ERROR(options.Validate());
  if (!options.enabled()) return FailedPrecondition("BuildAdapterLayout: model.peft is off");
  return ParamLayout::BuildLora(config, options.rank, options.targets, layout);
}

uint32_t DropoutThreshold(double p) {
  if (!(p > 0)) return 0;
  const double t = std::ldexp(p, 32);
  return t >= 4294967295.0 ? 4294967295u : std::max<uint32_t>(1, static_cast<uint32_t>(t));
}

DropoutMask MakeDropoutMask(const PeftOptions& o, uint64_t seed, uint64_t pass, int layer,
                            int target) {
  DropoutMask m;
  m.threshold = DropoutThreshold(o.dropout);
  if (!m.active()) return m;
  m.key = DropoutKey(seed, pass, static_cast<uint32_t>(layer), static_cast<uint32_t>(target));
  m.scale = static_cast<float>(1.0 / (1.0 - o.dropout));
  return m;
}

}  // namespace hypertrain::model
