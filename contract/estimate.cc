#include "contract/estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <tuple>

namespace hypertrain::contract {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// runtime/parallel/hsdp.h kShardAlignment: units pad to degree x 64 elements.
constexpr int64_t kShardAlignment = 64;

int64_t ParamsOf(const ModelShape& m) { return CountParams(m).total; }

// "H100" from "H100 80GB" (the family MeasuredMfu's records name).
std::string GpuFamily(const std::string& model) { return model.substr(0, model.find(' ')); }

}  // namespace

namespace {
struct NamedEntry {
  const char* name;
  NamedShape shape;
};
// {vocab, hidden, layers, heads, kv heads, intermediate, tied}, sequence length.
const NamedEntry kNamedShapes[] = {
    // Byte-level vocabulary; small enough to train on one CPU core in seconds.
    {"tiny", {{256, 128, 4, 4, 2, 384, true}, 128}},
    {"125m", {{32000, 768, 12, 12, 4, 2048, true}, 2048}},
    {"1b", {{128256, 2048, 16, 32, 8, 8192, true}, 2048}},    // Llama-3.2-1B config.json
    {"8b", {{128256, 4096, 32, 32, 8, 14336, false}, 8192}},  // Llama-3.1-8B config.json
};
}  // namespace

std::optional<NamedShape> NamedModelShape(const std::string& name) {
  for (const NamedEntry& e : kNamedShapes) {
    if (name == e.name) return e.shape;
  }
  return std::nullopt;
}

std::vector<std::string> NamedModelShapeNames() {
  std::vector<std::string> names;
  for (const NamedEntry& e : kNamedShapes) names.emplace_back(e.name);
  return names;
}

std::string ValidateRunShape(const RunShape& run) {
  const ModelShape& m = run.model;
  const std::pair<const char*, int64_t> positive[] = {
      {"model.vocab_size", m.vocab_size},
      {"model.hidden_size", m.hidden_size},
      {"model.num_hidden_layers", m.num_hidden_layers},
      {"model.num_attention_heads", m.num_attention_heads},
      {"model.num_key_value_heads", m.num_key_value_heads},
      {"model.intermediate_size", m.intermediate_size},
      {"sequence length (model.max_context_width)", run.seq_len},
      {"model.train_batch_size", run.micro_batch},
      {"model.grad_accumulation_steps", run.grad_accumulation},
      {"nodes", run.nodes},
      {"GPUs per node", run.gpus_per_node},
  };
  for (const auto& [key, v] : positive) {
    if (v <= 0) return std::string(key) + " must be > 0, got " + Str(v);
  }
  if (m.hidden_size % m.num_attention_heads != 0) {
    return "model.num_attention_heads (" + Str(m.num_attention_heads) +
           ") must divide model.hidden_size (" + Str(m.hidden_size) + ")";
  }
  if (m.num_attention_heads % m.num_key_value_heads != 0) {
    return "model.num_key_value_heads (" + Str(m.num_key_value_heads) +
           ") must divide model.num_attention_heads (" + Str(m.num_attention_heads) + ")";
  }
  return "";
}

ParamCounts CountParams(const ModelShape& m) {
  const int64_t C = m.hidden_size, V = m.vocab_size, F = m.intermediate_size;
  ParamCounts p;
  p.embedding = V * C;
  p.final_norm = C;
  p.lm_head = m.tie_word_embeddings ? 0 : V * C;
  p.per_block = 2 * C + C * m.q_dim() + 2 * C * m.kv_dim() + m.q_dim() * C + 3 * C * F;
  p.blocks = m.num_hidden_layers * p.per_block;
  p.total = p.embedding + p.final_norm + p.lm_head + p.blocks;
  p.matmul = m.num_hidden_layers * (p.per_block - 2 * C) + V * C;
  return p;
}

FlopCounts CountFlops(const ModelShape& m, int64_t seq, Checkpointing checkpointing) {
  const ParamCounts p = CountParams(m);
  const double l = static_cast<double>(m.num_hidden_layers), h = static_cast<double>(m.hidden_size),
               s = static_cast<double>(seq), V = static_cast<double>(m.vocab_size);
  FlopCounts f;
  f.model_per_token = 6.0 * static_cast<double>(p.matmul) + 12.0 * l * h * s;
  f.megatron_per_token = 96.0 * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
  // Full checkpointing runs each block's forward again in backward (its GEMMs,
  // 2 FLOPs per matmul parameter, and attention's 4 l h s); selective only
  // recomputes element-wise norms and SwiGLU, no matmul FLOPs.
  const double recompute =
      checkpointing == Checkpointing::kFull
          ? 2.0 * static_cast<double>(p.matmul - m.vocab_size * m.hidden_size) + 4.0 * l * h * s
          : 0.0;
  f.hardware_per_token = f.model_per_token + recompute;
  return f;
}

std::optional<ShardingPlan> PlanSharding(const RunShape& run, std::string* error) {
  std::string why;
  const std::optional<int64_t> degree =
      ResolveShardDegree(run.strategy, run.shard_degree, run.world(), run.gpus_per_node, &why);
  if (!degree) {
    *error = "model.shard_degree: " + why;
    return std::nullopt;
  }
  ShardingPlan p;
  p.strategy = run.strategy;
  p.shard_degree = *degree;
  p.replica_degree = run.world() / *degree;
  p.pooled = *degree > 1;
  // Zero2-style strategies keep gathered params from forward to backward (a
  // slot per block), the others re-gather (two slots).
  const bool reshard = ReshardsAfterForward(run.strategy);
  const int64_t L = run.model.num_hidden_layers;
  p.param_slots = p.pooled ? std::min<int64_t>(reshard ? 2 : std::max<int64_t>(1, L), std::max<int64_t>(L, 1)) : 0;
  // A single process keeps the unpadded layout; ranks pad for the shard group.
  p.pad_multiple = run.world() > 1 ? *degree * kShardAlignment : 1;
  if (run.world() > 1) {
    p.nccl_communicators = 1 + (p.shard_degree > 1 ? 1 : 0) + (p.replica_degree > 1 ? 1 : 0);
  }
  return p;
}

const std::vector<MfuRecord>& MeasuredMfu() {
  // docs/PERF.md; every row a single measured run, deterministic defaults,
  // bf16, synthetic data. MFU there uses model_per_token and 989.4 TF/s.
  static const std::vector<MfuRecord> kRecords = [] {
    ModelShape m1b{128256, 2048, 16, 32, 8, 8192, true};
    ModelShape m125{32000, 768, 12, 12, 4, 2048, true};
    const int64_t p1b = ParamsOf(m1b), p125 = ParamsOf(m125);
    const auto none = Checkpointing::kNone;
    return std::vector<MfuRecord>{
        {"1b 4x2048, 1 GPU", "1b", p1b, "H100", 1, none, false, 4, 2048, 0.529, 63650,
         "PERF.md seventh session, final tree (02468b9)"},
        {"1b 4x2048 selective, 1 GPU", "1b", p1b, "H100", 1, Checkpointing::kSelective, false, 4, 2048,
         0.517, 62220, "PERF.md sixth session (d08f3ad)"},
        {"125m 16x2048, 1 GPU", "125m", p125, "H100", 1, none, false, 16, 2048, 0.478, 572400,
         "PERF.md seventh session, final tree (02468b9)"},
        {"1b 4x2048, 1 GPU", "1b", p1b, "H200", 1, none, false, 4, 2048, 0.544, 65400,
         "PERF.md fourth session (slowest of three H200s, 65.4-67.0k)"},
        {"125m 16x2048, 1 GPU", "125m", p125, "H200", 1, none, false, 16, 2048, 0.495, 592000,
         "PERF.md fourth session (592-599k)"},
        {"1b 4x2048/GPU, HSDP 2x2", "1b", p1b, "H200", 4, none, false, 4, 2048, 0.487, 58680,
         "PERF.md HSDP fourth session (5f745e9)"},
        {"125m 16x2048/GPU, HSDP 2x2", "125m", p125, "H200", 4, none, false, 16, 2048, 0.458, 548200,
         "PERF.md HSDP fourth session (5f745e9)"},
        // FP8 block GEMMs (delayed scaling, e5m2 gradients), MFU against the
        // bf16 peak as the trainer reports it.
        {"1b 4x2048 FP8, 1 GPU", "1b", p1b, "H100", 1, none, true, 4, 2048, 0.634, 76306,
         "PERF.md FP8 (issue 25, fused casts): 1.19x the same call's bf16 64,031"},
        {"125m 16x2048 FP8, 1 GPU", "125m", p125, "H100", 1, none, true, 16, 2048, 0.491, 588091,
         "PERF.md FP8 (issue 25, fused casts): 1.03x the same call's bf16 571,056"},
        {"1b 4x2048 FP8, 1 GPU", "1b", p1b, "H200", 1, none, true, 4, 2048, 0.706, 85023,
         "PERF.md FP8 (issue 25, kept transposes): 1.278x the same call's bf16 66,526"},
        {"125m 16x2048 FP8, 1 GPU", "125m", p125, "H200", 1, none, true, 16, 2048, 0.558, 667505,
         "PERF.md FP8 (issue 25, kept transposes): 1.102x the same call's bf16 605,965"},
    };
  }();
  return kRecords;
}

const MfuRecord& NearestMfuRecord(const RunShape& run, int64_t params, const std::string& gpu_model) {
  const std::string family = GpuFamily(gpu_model);
  const MfuRecord* best = nullptr;
  auto key = [&](const MfuRecord& r) {
    const bool same_class = (r.world > 1) == (run.world() > 1);
    const bool same_fp8 = r.fp8 == run.fp8;
    const double distance = std::fabs(std::log(static_cast<double>(params) / r.params));
    const bool same_ckpt = r.checkpointing == run.checkpointing;
    const bool same_gpu = family.empty() || r.gpu == family;
    return std::make_tuple(!same_class, !same_fp8, distance, !same_ckpt, !same_gpu);
  };
  for (const MfuRecord& r : MeasuredMfu()) {
    if (best == nullptr || key(r) < key(*best)) best = &r;
  }
  return *best;
}

std::optional<double> ParseTokenCount(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double scale = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K': case 'k': scale = 1e3; break;
    case 'M': case 'm': scale = 1e6; break;
    case 'B': case 'b': case 'G': case 'g': scale = 1e9; break;
    case 'T': case 't': scale = 1e12; break;
    default: break;
  }
  if (scale != 1) digits.pop_back();
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(digits.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v * scale;
}

namespace {

std::vector<FitCheck> CheckFit(const MemoryParts& m, const std::optional<InstanceType>& instance) {
  std::vector<InstanceType> targets;
  if (instance) {
    targets.push_back(*instance);
  } else {  // one per GPU model, the first (by name) instance carrying it
    for (const InstanceType& t : KnownInstanceTypes()) {
      bool seen = false;
      for (const InstanceType& s : targets) seen = seen || s.gpu_model == t.gpu_model;
      if (!seen) targets.push_back(t);
    }
  }
  std::vector<FitCheck> out;
  for (const InstanceType& t : targets) {
    FitCheck f;
    f.instance = t;
    f.need = m.in_use();
    f.have = t.gpu_memory_bytes();
    f.fits = f.need <= f.have;
    f.tight = f.fits && f.have - f.need < f.have / 20;
    out.push_back(f);
  }
  return out;
}

// When the configured run does not fit its instance: changes that make it fit,
// smallest first (checkpointing, then another strategy, then both, then half
// the micro-batch with twice the accumulation).
std::vector<Alternative> FindAlternatives(const RunShape& run, int64_t have) {
  std::vector<Alternative> out;
  auto consider = [&](const RunShape& r, const std::vector<std::string>& sets) {
    std::string error;
    const std::optional<ShardingPlan> plan = PlanSharding(r, &error);
    if (!plan) return;
    const int64_t need = EstimateMemory(r, *plan).in_use();
    if (need <= have) out.push_back({sets, need});
  };
  const Checkpointing modes[] = {Checkpointing::kSelective, Checkpointing::kFull};
  for (Checkpointing c : modes) {
    if (c == run.checkpointing || (run.checkpointing == Checkpointing::kFull)) continue;
    RunShape r = run;
    r.checkpointing = c;
    consider(r, {std::string("model.activation_checkpointing=") + CheckpointingName(c)});
  }
  for (ShardingStrategy s : {ShardingStrategy::kFullShard, ShardingStrategy::kHybridShard}) {
    for (Checkpointing c : {run.checkpointing, Checkpointing::kSelective, Checkpointing::kFull}) {
      RunShape r = run;
      r.strategy = s;
      r.shard_degree = 0;
      r.checkpointing = c;
      if (s == run.strategy && c == run.checkpointing) continue;
      std::vector<std::string> sets = {std::string("model.sharding_strategy=") + ShardingStrategyName(s)};
      if (run.shard_degree != 0) sets.push_back("model.shard_degree=0");
      if (c != run.checkpointing) sets.push_back(std::string("model.activation_checkpointing=") + CheckpointingName(c));
      consider(r, sets);
    }
  }
  if (run.micro_batch > 1) {
    RunShape r = run;
    r.micro_batch = run.micro_batch / 2;
    r.grad_accumulation = run.grad_accumulation * 2;
    consider(r, {"model.train_batch_size=" + Str(r.micro_batch),
                 "model.grad_accumulation_steps=" + Str(r.grad_accumulation)});
  }
  // In the order tried (the smallest change first), unique, at most 4.
  std::vector<Alternative> unique;
  for (const Alternative& a : out) {
    bool dup = false;
    for (const Alternative& u : unique) dup = dup || u.sets == a.sets;
    if (!dup && unique.size() < 4) unique.push_back(a);
  }
  return unique;
}

}  // namespace

std::optional<Estimate> MakeEstimate(const RunShape& run, const EstimateOptions& options,
                                     std::string* error) {
  if (std::string e = ValidateRunShape(run); !e.empty()) {
    *error = e;
    return std::nullopt;
  }
  if (options.mfu && !(*options.mfu > 0 && *options.mfu <= 1)) {
    *error = "--mfu must be in (0, 1], got " + std::to_string(*options.mfu);
    return std::nullopt;
  }
  Estimate e;
  e.run = run;
  std::optional<ShardingPlan> plan = PlanSharding(run, error);
  if (!plan) return std::nullopt;
  e.sharding = *plan;
  e.params = CountParams(run.model);
  e.flops = CountFlops(run.model, run.seq_len, run.checkpointing);
  e.memory = EstimateMemory(run, e.sharding);
  for (const std::string& name : ShardingStrategyNames()) {
    auto hybrid = [](ShardingStrategy s) {
      return s == ShardingStrategy::kHybridShard || s == ShardingStrategy::kHybridShardZero2;
    };
    RunShape r = run;
    r.strategy = *ParseShardingStrategy(name);
    // The configured degree for the hybrid strategies when one was given to
    // either of them; every other strategy fixes its own.
    r.shard_degree = hybrid(r.strategy) && hybrid(run.strategy) ? run.shard_degree : 0;
    std::string ignored;
    if (std::optional<ShardingPlan> p = PlanSharding(r, &ignored)) {
      e.strategies.push_back({*p, EstimateMemory(r, *p)});
    }
  }
  if (run.device == Device::kCuda) {
    e.fit = CheckFit(e.memory, options.instance);
    if (options.instance && !e.fit.front().fits) {
      e.alternatives = FindAlternatives(run, e.fit.front().have);
    }
  }

  // Speed: an MFU (given or measured) on this GPU's peak.
  const std::string gpu = options.instance ? options.instance->gpu_model : "";
  const MfuRecord& record = NearestMfuRecord(run, e.params.total, gpu);
  if (options.mfu) {
    e.mfu = *options.mfu;
    e.mfu_source = "--mfu";
  } else {
    e.mfu = record.mfu;
    e.mfu_source = record.name + " on " + record.gpu + " (" + record.source + ")";
    const double ratio = static_cast<double>(e.params.total) / record.params;
    if (ratio > 1.5 || ratio < 1 / 1.5) {
      e.mfu_source += "; no run of this size was measured (" + std::to_string(record.params / 1000000) +
                      " M there)";
    }
    if (record.fp8 != run.fp8) {
      // FP8 of the nearest size on one GPU against bf16 in the same session:
      // the speed-up its GEMMs gave there.
      const MfuRecord* fp8 = nullptr;
      const MfuRecord* bf16 = nullptr;
      for (const MfuRecord& r : MeasuredMfu()) {
        if (!r.fp8 || r.world != 1) continue;
        if (fp8 == nullptr || std::fabs(std::log(static_cast<double>(e.params.total) / r.params)) <
                                  std::fabs(std::log(static_cast<double>(e.params.total) / fp8->params))) {
          fp8 = &r;
        }
      }
      for (const MfuRecord& r : MeasuredMfu()) {
        if (fp8 != nullptr && !r.fp8 && r.world == 1 && r.model == fp8->model && r.gpu == fp8->gpu &&
            r.checkpointing == Checkpointing::kNone) {
          bf16 = &r;
        }
      }
      if (fp8 != nullptr && bf16 != nullptr) {
        const double factor = run.fp8 ? fp8->mfu / bf16->mfu : bf16->mfu / fp8->mfu;
        e.mfu *= factor;
        e.mfu_source += "; x " + std::to_string(factor).substr(0, 4) + (run.fp8 ? " for FP8 GEMMs" : " for bf16 GEMMs") +
                        " (" + fp8->model + " FP8 vs bf16 on one " + fp8->gpu + ")";
      }
    }
    if (record.seq_len != run.seq_len) {
      e.mfu_source += "; measured at seq " + std::to_string(record.seq_len);
    }
    // The device sustains the same hardware FLOP/s whatever it recomputes:
    // recompute the record did not do lowers the model-FLOPs utilisation.
    const double record_hw =
        CountFlops(run.model, run.seq_len, record.checkpointing).hardware_per_token;
    if (record_hw != e.flops.hardware_per_token) {
      e.mfu *= record_hw / e.flops.hardware_per_token;
      e.mfu_source += std::string("; x ") + std::to_string(record_hw / e.flops.hardware_per_token).substr(0, 4) +
                      " for " + CheckpointingName(run.checkpointing) + " checkpointing's recompute";
    }
  }
  double peak_tflops = options.peak_tflops;
  if (peak_tflops <= 0) peak_tflops = options.instance ? options.instance->peak_bf16_tflops : 989.4;
  e.peak_flops = peak_tflops * 1e12;
  e.tokens_per_s_per_gpu = e.mfu * e.peak_flops / e.flops.model_per_token;
  e.tokens_per_s = e.tokens_per_s_per_gpu * static_cast<double>(run.world());
  e.step_seconds = static_cast<double>(run.tokens_per_step()) / e.tokens_per_s;
  if (options.tokens) {
    e.tokens = options.tokens;
    e.seconds = *options.tokens / e.tokens_per_s;
    e.gpu_hours = e.seconds / 3600.0 * static_cast<double>(run.world());
    e.steps = static_cast<int64_t>(std::ceil(*options.tokens / static_cast<double>(run.tokens_per_step())));
  }
  return e;
}

}  // namespace hypertrain::contract
