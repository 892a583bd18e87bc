#include "runtime/estimate/estimate.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

namespace hypertrain::estimate {
namespace {

using contract::Checkpointing;
using contract::Estimate;
using contract::MemoryParts;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Count(int64_t n) {  // 1234567 -> "1,234,567"
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Short(double n) {  // 1.24e9 -> "1.24 B"
  if (n >= 1e12) return fmt::format("{:.2f} T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f} k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string Usd(double usd) {  // 1234567.891 -> "$1,234,568"; 98.32 -> "$98.32"
  if (usd >= 1000) return "$" + Count(static_cast<int64_t>(usd + 0.5));
  return fmt::format("${:.2f}", usd);
}

std::string GiB(int64_t bytes) { return fmt::format("{:.2f}", bytes / kGiB); }

std::string Duration(double seconds) {
  if (seconds >= 2 * 86400) return fmt::format("{:.1f} days", seconds / 86400);
  if (seconds >= 2 * 3600) return fmt::format("{:.1f} hours", seconds / 3600);
  if (seconds >= 120) return fmt::format("{:.1f} minutes", seconds / 60);
  return fmt::format("{:.1f} s", seconds);
}

// The rows of the memory table: label and the part's bytes.
struct Row {
  const char* label;
  int64_t (*bytes)(const MemoryParts&);
};

}  // namespace

StatusOr<contract::RunShape> RunShapeFromConfig(const config::TrainConfig& c, const Layout& layout,
                                                const contract::InstanceType* instance) {
  contract::RunShape r;
  r.model = c.model;  // the contract::ModelShape part of the ModelConfig
  r.seq_len = c.seq_len();
  r.micro_batch = c.train_batch_size;
  r.grad_accumulation = c.grad_accumulation_steps;
  r.precision = c.precision;  // the model uses the contract modes
  r.checkpointing = c.activation_checkpointing;
  r.deterministic = c.deterministic;
  r.fp8 = c.fp8.enabled;
  r.strategy = c.sharding_strategy;
  r.shard_degree = c.shard_degree;
  r.nodes = layout.nodes > 0 ? layout.nodes : c.num_nodes;
  r.gpus_per_node = layout.gpus_per_node > 0 ? layout.gpus_per_node
                    : instance != nullptr    ? instance->gpus
                                             : c.devices;
  r.device = c.backend == "cpu" ? contract::Device::kCpu : contract::Device::kCuda;
  r.prefetch_depth = c.data.prefetch_depth;
  if (c.finetune.peft.enabled()) {
    r.peft.type = model::PeftTypeName(c.finetune.peft.type);
    r.peft.rank = c.finetune.peft.rank;
    r.peft.fp8_base = c.finetune.peft.fp8_base;
    for (int t : c.finetune.peft.targets) r.peft.targets.push_back(model::TargetModuleName(t));
  }
  return r;
}

std::vector<std::string> ConfigNotes(const config::TrainConfig& c, const contract::RunShape& run,
                                     const contract::InstanceType* instance) {
  std::vector<std::string> notes;
  // Tensor/context/expert parallelism, MoE and activation offload never
  // get here: the config refuses them (runtime/config, "cannot honour").
  if (!run.peft.type.empty()) {
    notes.push_back(fmt::format(
        "model.peft ({} rank {}): memory is PEFT's (the adapters' state; the frozen base{}, 1/S "
        "of it per rank for a shard group of S, plus its gather slots); FLOPs and speed are full "
        "training's (a PEFT step skips the base's weight gradients)",
        run.peft.type, run.peft.rank,
        run.peft.type == "qlora" ? (run.peft.fp8_base ? " with NF4 block projections on CUDA, "
                                                        "each block cast to e4m3 codes for its GEMMs"
                                                      : " with NF4 block projections on CUDA")
        : run.peft.fp8_base      ? " with its block projections as e4m3 codes on CUDA"
                                 : ""));
  }
  if (run.fp8) {
    notes.push_back(
        "model.fp8: speed from FP8 runs of docs/PERF.md or, for other kinds of run, the FP8/bf16 "
        "speed-up measured there (one H200: 1b 1.28x, 125m 1.10x; one H100, an earlier FP8 "
        "path: 1b 1.19x, 125m 1.03x); memory is the bf16 plan (FP8 "
        "peaked at bf16's there)");
  }
  if (instance != nullptr && c.devices != run.gpus_per_node && c.devices != 1) {
    notes.push_back(fmt::format("trainer.devices {} differs from {}'s {} GPUs; estimated with {} per node",
                                c.devices, instance->name, instance->gpus, run.gpus_per_node));
  }
  if (run.device == contract::Device::kCpu) {
    notes.push_back("trainer.backend: cpu: memory is the CPU backend's (fp32 everywhere, host RAM); "
                    "speed assumes a GPU's MFU and is meaningless for the CPU");
  }
  return notes;
}

std::string FormatEstimate(const Estimate& e, const std::vector<std::string>& notes,
                           const std::string& title, const Cost* cost) {
  const contract::RunShape& r = e.run;
  const contract::ModelShape& m = r.model;
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  line("hypertrain estimate: " + title);
  line(fmt::format("model     vocab {}, hidden {}, {} layers, heads {}/{} (head dim {}), ffn {}, {}",
                   m.vocab_size, m.hidden_size, m.num_hidden_layers, m.num_attention_heads,
                   m.num_key_value_heads, m.head_dim(), m.intermediate_size,
                   m.tie_word_embeddings ? "tied embedding" : "untied LM head"));
  line(fmt::format("run       seq {} x micro-batch {} x accumulation {} x {} ranks = {} tokens/step; "
                   "{}; activation checkpointing {}{}",
                   r.seq_len, r.micro_batch, r.grad_accumulation, r.world(), Count(r.tokens_per_step()),
                   contract::PrecisionName(r.precision), contract::CheckpointingName(r.checkpointing),
                   r.deterministic ? "" : "; not deterministic"));
  std::string where = fmt::format("{} node{} x {} {}", r.nodes, r.nodes == 1 ? "" : "s",
                                  r.gpus_per_node, r.device == contract::Device::kCpu ? "CPU ranks" : "GPUs");
  if (e.fit.size() == 1) where += fmt::format(" ({}, {})", e.fit[0].instance.name, e.fit[0].instance.gpu_model);
  line(fmt::format("layout    {}; {}: shard group {}, replica group {}", where,
                   contract::ShardingStrategyName(e.sharding.strategy), e.sharding.shard_degree,
                   e.sharding.replica_degree));
  line("");
  const contract::ParamCounts& p = e.params;
  auto param_row = [&](const std::string& label, int64_t n, bool with_share) {
    line(fmt::format("  {:<28}{:>16}{}", label, Count(n),
                     with_share ? fmt::format("  {:5.1f}%", 100.0 * n / p.total) : ""));
  };
  line("parameters");
  param_row(m.tie_word_embeddings ? "embedding (= LM head, tied)" : "embedding", p.embedding, true);
  if (p.lm_head > 0) param_row("LM head", p.lm_head, true);
  param_row(fmt::format("blocks ({} x {})", m.num_hidden_layers, Short(p.per_block)), p.blocks, true);
  param_row("final norm", p.final_norm, false);
  line(fmt::format("  {:<28}{:>16}  ({})", "total", Count(p.total), Short(p.total)));
  line("");
  line("FLOPs per token");
  line(fmt::format("  {:<64}{:>10.4g}", fmt::format("model: 6 x {} matmul params + 12 l h s (the trainer's MFU)",
                                                    Short(p.matmul)),
                   e.flops.model_per_token));
  line(fmt::format("  {:<64}{:>10.4g}", fmt::format("hardware: model + the recompute of {} checkpointing",
                                                    contract::CheckpointingName(r.checkpointing)),
                   e.flops.hardware_per_token));
  line(fmt::format("  {:<64}{:>10.4g}", "Megatron: 96 l h^2 (1 + s/6h + V/16lh), full recompute",
                   e.flops.megatron_per_token));
  line("");

  // Memory: one column per strategy, the configured one marked.
  const Row rows[] = {
      {"frozen base", [](const MemoryParts& x) { return x.frozen_base; }},
      {"weights", [](const MemoryParts& x) { return x.weights; }},
      {"master weights fp32", [](const MemoryParts& x) { return x.master; }},
      {"gradients fp32", [](const MemoryParts& x) { return x.gradients; }},
      {"optimizer m+v fp32", [](const MemoryParts& x) { return x.optimizer; }},
      {"unit pool (gathered)", [](const MemoryParts& x) { return x.unit_pool; }},
      {"activations", [](const MemoryParts& x) { return x.activations; }},
      {"backward workspace", [](const MemoryParts& x) { return x.workspace; }},
      {"embedding-grad gather", [](const MemoryParts& x) { return x.embedding_gather; }},
      {"buffers", [](const MemoryParts& x) { return x.buffers; }},
      {"= allocated", [](const MemoryParts& x) { return x.allocated(); }},
      {"+ in-step transient", [](const MemoryParts& x) { return x.transient; }},
      {"+ context, NCCL", [](const MemoryParts& x) { return x.overhead; }},
      {"= in use", [](const MemoryParts& x) { return x.in_use(); }},
  };
  std::string head = fmt::format("{:<24}", r.device == contract::Device::kCpu ? "memory per rank (GiB)"
                                                                               : "memory per GPU (GiB)");
  for (const auto& s : e.strategies) {
    std::string name = contract::ShardingStrategyName(s.plan.strategy);
    if (s.plan.strategy == e.sharding.strategy) name += "*";
    head += fmt::format(" {:>19}", name);
  }
  line(head);
  for (const Row& row : rows) {
    bool any = false;
    for (const auto& s : e.strategies) any = any || row.bytes(s.memory) != 0;
    if (!any) continue;
    std::string l = fmt::format("  {:<22}", row.label);
    for (const auto& s : e.strategies) l += fmt::format(" {:>19}", GiB(row.bytes(s.memory)));
    line(l);
  }
  std::string degrees = fmt::format("  {:<22}", "shard degree");
  for (const auto& s : e.strategies) degrees += fmt::format(" {:>19}", s.plan.shard_degree);
  line(degrees);
  const MemoryParts& mem = e.memory;
  std::string detail = fmt::format("  (* configured; {}", contract::PrecisionName(r.precision));
  if (r.device == contract::Device::kCuda) {
    detail += fmt::format("; attention workspace {} MiB", mem.attention_workspace >> 20);
    if (mem.attention_batch_chunk < r.micro_batch) {
      detail += fmt::format(" in calls of {} samples", mem.attention_batch_chunk);
    }
    detail += fmt::format("; LM head in chunks of {} tokens", mem.loss_chunk_rows);
    if (mem.grads_share_activations) detail += "; block gradients in freed activations";
  }
  line(detail + ")");
  if (mem.embedding_gather > 0) {
    line(fmt::format("  (the split embedding gradient gathers {} ranks x {} tokens of output gradients: {} GiB "
                     "per GPU; at most the vocabulary's rows, beyond that the embedding is reduce-scattered)",
                     e.sharding.shard_degree, r.micro_batch * r.seq_len, GiB(mem.embedding_gather)));
  }
  line("");
  for (const contract::FitCheck& f : e.fit) {
    const double have = f.have / kGiB, need = f.need / kGiB;
    const std::string verdict = !f.fits ? fmt::format("DOES NOT FIT: needs {:.1f} GiB, {:.1f} GiB over", need, need - have)
                                : f.tight ? fmt::format("fits, tight: {:.1f} GiB in use, {:.1f} GiB free", need, have - need)
                                          : fmt::format("fits: {:.1f} GiB in use, {:.1f} GiB free ({:.0f}%)", need,
                                                        have - need, 100.0 * (have - need) / have);
    line(fmt::format("fit {:<22} {:>6.1f} GiB per GPU: {}", f.instance.gpu_model + " (" + f.instance.name + ")",
                     have, verdict));
  }
  if (!e.alternatives.empty()) {
    line("  fits instead with:");
    for (const auto& a : e.alternatives) {
      std::string sets;
      for (const std::string& kv : a.sets) sets += " --set " + kv;
      line(fmt::format("   {}   ({:.1f} GiB)", sets, a.in_use / kGiB));
    }
  }
  if (!e.fit.empty()) line("");
  line(fmt::format("speed     MFU {:.1f}% from {}", 100 * e.mfu, e.mfu_source));
  line(fmt::format("          x {:.1f} TFLOP/s peak / {:.3g} FLOPs per token = {} tokens/s per GPU, "
                   "{} tokens/s in all, {:.3f} s per step",
                   e.peak_flops / 1e12, e.flops.model_per_token, Count(static_cast<int64_t>(e.tokens_per_s_per_gpu)),
                   Count(static_cast<int64_t>(e.tokens_per_s)), e.step_seconds));
  if (e.tokens) {
    line(fmt::format("budget    {} tokens: {} on {} GPUs = {} GPU-hours, {} steps", Short(*e.tokens),
                     Duration(e.seconds), r.world(), Count(static_cast<int64_t>(e.gpu_hours + 0.5)),
                     Count(e.steps)));
  }
  if (cost != nullptr) {
    std::string total;
    if (cost->usd()) total = fmt::format("; the budget: {}", Usd(*cost->usd()));
    line(fmt::format("cost      {} x {} at {}/h = {}/h{}", cost->nodes, cost->instance, Usd(cost->usd_per_hour),
                     Usd(cost->usd_per_hour_all()), total));
    line(fmt::format("          price: {}", cost->source));
  }
  if (!notes.empty()) {
    line("");
    line("notes");
    for (const std::string& n : notes) line("  - " + n);
  }
  return o;
}

std::string EstimateToJson(const Estimate& e, const std::vector<std::string>& notes, const Cost* cost) {
  using nlohmann::json;
  auto memory = [](const MemoryParts& m) {
    return json{{"weights", m.weights},         {"master", m.master},
                {"gradients", m.gradients},     {"optimizer", m.optimizer},
                {"unitPool", m.unit_pool},      {"activations", m.activations},
                {"workspace", m.workspace},     {"embeddingGather", m.embedding_gather},
                {"buffers", m.buffers},         {"frozenBase", m.frozen_base},
                {"allocated", m.allocated()},   {"transient", m.transient},
                {"overhead", m.overhead},       {"inUse", m.in_use()}};
  };
  json j;
  const contract::RunShape& r = e.run;
  j["run"] = {{"seqLen", r.seq_len},
              {"microBatch", r.micro_batch},
              {"gradAccumulation", r.grad_accumulation},
              {"nodes", r.nodes},
              {"gpusPerNode", r.gpus_per_node},
              {"world", r.world()},
              {"tokensPerStep", r.tokens_per_step()},
              {"precision", contract::PrecisionName(r.precision)},
              {"activationCheckpointing", contract::CheckpointingName(r.checkpointing)},
              {"shardingStrategy", contract::ShardingStrategyName(e.sharding.strategy)},
              {"shardDegree", e.sharding.shard_degree},
              {"replicaDegree", e.sharding.replica_degree}};
  j["params"] = {{"embedding", e.params.embedding}, {"finalNorm", e.params.final_norm},
                 {"lmHead", e.params.lm_head},      {"perBlock", e.params.per_block},
                 {"blocks", e.params.blocks},       {"total", e.params.total},
                 {"matmul", e.params.matmul}};
  j["flopsPerToken"] = {{"model", e.flops.model_per_token},
                        {"hardware", e.flops.hardware_per_token},
                        {"megatron", e.flops.megatron_per_token}};
  j["memoryPerRank"] = memory(e.memory);
  json strategies = json::object();
  for (const auto& s : e.strategies) {
    json m = memory(s.memory);
    m["shardDegree"] = s.plan.shard_degree;
    strategies[contract::ShardingStrategyName(s.plan.strategy)] = m;
  }
  j["memoryByStrategy"] = strategies;
  json fit = json::array();
  for (const auto& f : e.fit) {
    fit.push_back({{"instanceType", f.instance.name}, {"gpu", f.instance.gpu_model},
                   {"need", f.need}, {"have", f.have}, {"fits", f.fits}, {"tight", f.tight}});
  }
  j["fit"] = fit;
  json alts = json::array();
  for (const auto& a : e.alternatives) alts.push_back({{"set", a.sets}, {"inUse", a.in_use}});
  j["alternatives"] = alts;
  j["speed"] = {{"mfu", e.mfu},
                {"mfuSource", e.mfu_source},
                {"peakFlopsPerGpu", e.peak_flops},
                {"tokensPerSecondPerGpu", e.tokens_per_s_per_gpu},
                {"tokensPerSecond", e.tokens_per_s},
                {"stepSeconds", e.step_seconds}};
  if (e.tokens) {
    j["budget"] = {{"tokens", *e.tokens}, {"seconds", e.seconds}, {"days", e.seconds / 86400},
                   {"gpuHours", e.gpu_hours}, {"steps", e.steps}};
  }
  if (cost != nullptr) {
    j["cost"] = {{"instanceType", cost->instance}, {"usdPerInstanceHour", cost->usd_per_hour},
                 {"instances", cost->nodes}, {"usdPerHour", cost->usd_per_hour_all()}, {"priceSource", cost->source}};
    if (cost->usd()) j["cost"]["usdForBudget"] = *cost->usd();
  }
  j["notes"] = notes;
  return j.dump(2) + "\n";
}

}  // namespace hypertrain::estimate
