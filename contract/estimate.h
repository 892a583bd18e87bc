#pragma once
// A training run's size, speed, memory and cost, predicted from its shape
// alone (no device needed). `hypertrain estimate` prints it; a TrainingJob's
// dry run (spec.estimateOnly) puts it in status before any pod exists, so
// both sides compute it with this one library. Standard library only.
//
// What it models, and from where:
//  - Parameters: the flat unit layout of runtime/model/layout.h (embedding
//    unit = embed_tokens + final norm [+ untied lm_head]; one unit per block;
//    tensors aligned to 64 elements, units padded to the shard degree x 64
//    in multi-rank runs). Tests compare every count with ParamLayout.
//  - FLOPs per token: the trainer's MFU convention, 6 x (matmul parameters,
//    LM head counted even when tied) + 12 x layers x hidden x seq (PaLM /
//    torchtitan; runtime/model/config.h), and Megatron's formula
//    96 B s l h^2 (1 + s/6h + V/16lh) per iteration (full recompute, GPT MLP)
//    divided by B s, for comparison only.
//  - Memory per rank, by part, mirroring the backends' allocation plans: the
//    CUDA backend's state, unit pool and static activation plan
//    (runtime/backends/cuda/backend.cc Init, step.cc PlanActivations; cuDNN's
//    attention workspace from the formula its plans report, see
//    AttentionWorkspaceBytes) and the CPU backend's buffers
//    (runtime/backends/cpu/backend.cc, model.cc). The CPU prediction is
//    tested against the CPU backend's real heap allocations, the CUDA one
//    against the backend's own counters (GPU test) and docs/PERF.md.
//  - Speed: tokens/s = MFU x peak / FLOPs per token, with the MFU of the
//    nearest measured run in docs/PERF.md (MeasuredMfu) unless given.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "contract/instance_types.h"
#include "contract/model_shape.h"
#include "contract/precision.h"
#include "contract/sharding.h"

namespace hypertrain::contract {

// The trainer's named shapes (model.shape), listed once here: their fields and
// default sequence length; runtime/model's NamedModelConfig builds on this
// table and adds the runtime-only fields (RoPE). nullopt for other names. The
// operator needs them to estimate an inline config that says `shape: 1b`.
struct NamedShape {
  ModelShape model;
  int64_t max_context_width = 0;
};
std::optional<NamedShape> NamedModelShape(const std::string& name);
// The names NamedModelShape knows, in table order (tiny, 125m, 1b, 8b).
std::vector<std::string> NamedModelShapeNames();

enum class Device { kCuda, kCpu };

// What a run is: the model, one rank's micro-batch, and the parallel layout.
struct RunShape {
  ModelShape model;
  int64_t seq_len = 0;
  int64_t micro_batch = 1;        // sequences per rank per micro-batch
  int64_t grad_accumulation = 1;  // micro-batches per optimizer step
  Precision precision = Precision::kBF16;
  Checkpointing checkpointing = Checkpointing::kNone;
  bool deterministic = true;  // CUDA: cuDNN's atomic-free attention backward
  bool fp8 = false;           // model.fp8: FP8 block GEMMs (speed from FP8 records;
                              // memory is the bf16 plan: FP8 adds ~0.36 GiB, PERF.md)
  ShardingStrategy strategy = kDefaultShardingStrategy;
  int64_t shard_degree = 0;  // 0 = the strategy's default
  int64_t nodes = 1;
  int64_t gpus_per_node = 1;  // ranks per node
  Device device = Device::kCuda;
  int prefetch_depth = 2;  // data.prefetch_depth (CUDA staging slots)
  // PEFT (model.peft): LoRA adapters of `rank` beside the named projections
  // ("q_proj" ... "down_proj") are all that trains; the base is frozen and,
  // under a sharding strategy, sharded over the shard group (see MemoryParts).
  struct Peft {
    std::string type;  // "" (none), "lora", "qlora"
    int64_t rank = 0;
    std::vector<std::string> targets;
    // model.peft.fp8_base (CUDA): LoRA's block projections held as e4m3
    // codes, a byte per element; QLoRA's stay NF4, plus one block of codes.
    bool fp8_base = false;
  } peft;

  int64_t world() const { return nodes * gpus_per_node; }
  int64_t tokens_per_step() const { return micro_batch * grad_accumulation * seq_len * world(); }
};

// Empty when the shape is usable; else the first problem, naming the key
// (e.g. "model.num_key_value_heads (3) must divide model.num_attention_heads (8)").
std::string ValidateRunShape(const RunShape& run);

// ---- Parameters -----------------------------------------------------------
struct ParamCounts {
  int64_t embedding = 0;   // embed_tokens
  int64_t final_norm = 0;
  int64_t lm_head = 0;     // 0 when tied
  int64_t per_block = 0;   // 2 norms + q,k,v,o + gate,up,down
  int64_t blocks = 0;      // layers x per_block
  int64_t total = 0;       // trainable (tied embedding once)
  int64_t matmul = 0;      // block projections + the LM head (counted even when tied)
};
ParamCounts CountParams(const ModelShape& m);

// Elements of the embedding unit and of one block unit as ParamLayout lays
// them out: `numel` = end of the last tensor, `padded` = the buffer size.
struct UnitSizes {
  int64_t embedding_numel = 0, embedding_padded = 0;
  int64_t block_numel = 0, block_padded = 0;
  int64_t num_units = 0;  // 1 + layers
};
UnitSizes LayoutUnits(const ModelShape& m, int64_t tensor_alignment, int64_t pad_multiple);

// ---- FLOPs ----------------------------------------------------------------
struct FlopCounts {
  double model_per_token = 0;     // the trainer's MFU numerator
  double megatron_per_token = 0;  // Megatron's formula / (B s), full recompute
  double hardware_per_token = 0;  // model + what this checkpointing mode recomputes
};
FlopCounts CountFlops(const ModelShape& m, int64_t seq, Checkpointing checkpointing);

// ---- Sharding ---------------------------------------------------------------
struct ShardingPlan {
  ShardingStrategy strategy = kDefaultShardingStrategy;
  int64_t shard_degree = 1;
  int64_t replica_degree = 1;
  bool pooled = false;          // full-size units only while gathered (degree > 1)
  int64_t param_slots = 0;      // block parameter slots of the unit pool
  int64_t pad_multiple = 1;     // unit padding (ShardedBackendOptions)
  int nccl_communicators = 0;   // groups of more than one rank (world, shard, replica)
};
// nullopt with *error set when the strategy's shard-degree rule is broken.
std::optional<ShardingPlan> PlanSharding(const RunShape& run, std::string* error);

// ---- Memory ---------------------------------------------------------------
// Bytes on one rank's device (CUDA) or in its process (CPU), by part. The
// parts add up to `allocated()`, the figure the CUDA backend prints as
// "allocated" (every cudaMalloc) and PyTorch calls max_memory_allocated().
struct MemoryParts {
  int64_t weights = 0;      // compute-dtype params: whole units, or the owned shard when pooled
  int64_t master = 0;       // fp32 master weights of the owned range (CPU: the weights themselves)
  int64_t gradients = 0;    // fp32 gradients held outside the activation memory
  int64_t optimizer = 0;    // AdamW m and v, fp32, owned range
  int64_t unit_pool = 0;    // full-size params + grads of gathered units (sharded runs)
  int64_t activations = 0;  // activations kept for backward (+ the recompute scratch)
  int64_t workspace = 0;    // backward region: LM-head logits chunk, dact/dgu, attention workspace
  int64_t embedding_gather = 0;  // split embedding gradient: every shard rank's tokens and
                                 // output gradients (shard degree x micro-batch x hidden),
                                 // only while that is <= vocab rows (SplitsEmbeddingGrad)
  int64_t buffers = 0;      // GEMM workspace, staged batches, small scratch
  int64_t transient = 0;    // CPU: allocated inside a step (the LM head's logits chunk)
  int64_t overhead = 0;     // CUDA context, cuBLAS/cuDNN, NCCL buffers (not allocated by us)
  // PEFT: weights, master, gradients and optimizer are the adapters'; the
  // frozen base (compute dtype, or fp32 on the CPU; QLoRA: NF4 block
  // projections) is `frozen_base`: 1/S of it per rank under a strategy with
  // a shard group of S > 1, whose gather slots (the embedding + 2 blocks) are
  // in unit_pool (the QLoRA dequantisation buffer on CUDA is in buffers).
  int64_t frozen_base = 0;

  int64_t allocated() const {
    return weights + master + gradients + optimizer + unit_pool + activations + workspace +
           embedding_gather + buffers + frozen_base;
  }
  int64_t peak() const { return allocated() + transient; }  // what a step touches
  int64_t in_use() const { return peak() + overhead; }      // what the device/driver sees

  // The CUDA backend's own counters ("[cuda] ... planned = state +
  // activations + unit pool; allocated"): state = weights + master +
  // separate gradients + m/v; activation plan = the single plan allocation.
  int64_t cuda_state = 0;
  int64_t cuda_activation_plan = 0;

  // Details of the plan.
  bool grads_share_activations = false;  // CUDA: block gradients live in dead activations
  int64_t attention_workspace = 0;       // CUDA: attention backward's workspace
  int64_t attention_batch_chunk = 0;     // CUDA: samples per deterministic cuDNN backward call
  int64_t loss_chunk_rows = 0;           // LM-head token rows per chunk
};

MemoryParts EstimateMemory(const RunShape& run, const ShardingPlan& plan);

// cuDNN's fused attention backward workspace for one micro-batch of `batch`
// samples, as CudaBackend plans it: the softmax sums (4 B H S) + cuDNN's
// own workspace; deterministic: the dP buffer 2 B H S^2 + an fp32 dQ
// accumulator 4 B S H D (what cuDNN 9.14 and 9.19 report: 1089 MiB for 1b at
// 4 x 2048, 1634 MiB for 125m at 16 x 2048, docs/PERF.md), in batch chunks
// of at most 2 GiB (HT_CUDNN_BWD_WORKSPACE_MB's default); atomic dQ
// (deterministic false): 4 B H S D for the accumulator + ~21 B H S D (cuDNN's
// 337 MiB at 1b 4 x 2048). head_dim 64/128 with 16-bit compute only; else our
// kernels' 4 B H S. Returns the bytes and the samples per call.
struct AttentionWorkspace {
  int64_t bytes = 0;
  int64_t batch_chunk = 0;
};
AttentionWorkspace AttentionWorkspaceBytes(const ModelShape& m, int64_t batch, int64_t seq,
                                           Precision precision, bool deterministic);

// ---- Throughput: measured MFU ---------------------------------------------
// One measured run of docs/PERF.md.
struct MfuRecord {
  std::string name;     // "1b 4x2048, 1 GPU"
  std::string model;    // named shape: "1b", "125m"
  int64_t params = 0;   // total parameters of that shape
  std::string gpu;      // "H100", "H200"
  int64_t world = 1;
  Checkpointing checkpointing = Checkpointing::kNone;
  bool fp8 = false;
  int64_t micro_batch = 0;
  int64_t seq_len = 0;
  double mfu = 0;                   // model FLOPs utilisation, 0..1
  double tokens_per_s_per_gpu = 0;  // as measured
  std::string source;               // where in docs/PERF.md
};
const std::vector<MfuRecord>& MeasuredMfu();

// The record to borrow an MFU from: same class of run (one GPU, or sharded
// over several) first, then FP8 or not as the run, then the nearest parameter
// count, then the same checkpointing mode, then the same GPU model (from `gpu_model`, e.g.
// "H100 80GB"; empty = any).
const MfuRecord& NearestMfuRecord(const RunShape& run, int64_t params, const std::string& gpu_model);

// ---- The estimate -----------------------------------------------------------
struct FitCheck {
  InstanceType instance;
  int64_t need = 0;       // MemoryParts::in_use()
  int64_t have = 0;       // the GPU's memory
  bool fits = false;      // need <= have
  bool tight = false;     // fits with less than 5% of the GPU to spare
};

struct EstimateOptions {
  std::optional<InstanceType> instance;  // fit check and peak; nullopt = all known GPUs
  std::optional<double> mfu;             // 0..1; nullopt = from MeasuredMfu
  double peak_tflops = 0;                // per GPU; 0 = the instance's (else H100's)
  std::optional<double> tokens;          // budget for days and GPU-hours
};

struct StrategyMemory {
  ShardingPlan plan;
  MemoryParts memory;
};

struct Alternative {
  std::vector<std::string> sets;  // {"model.activation_checkpointing=selective", ...}
  int64_t in_use = 0;
};

struct Estimate {
  RunShape run;
  ShardingPlan sharding;
  ParamCounts params;
  FlopCounts flops;
  MemoryParts memory;                      // the configured strategy
  std::vector<StrategyMemory> strategies;  // every strategy valid for this world
  std::vector<FitCheck> fit;               // the instance, or one per GPU model
  std::vector<Alternative> alternatives;   // configurations that fit when this one does not
  double mfu = 0;
  std::string mfu_source;  // "--mfu" or the record's name and source
  double peak_flops = 0;   // per GPU
  double tokens_per_s_per_gpu = 0;
  double tokens_per_s = 0;
  double step_seconds = 0;
  std::optional<double> tokens;  // the budget
  double seconds = 0;            // for the budget
  double gpu_hours = 0;
  int64_t steps = 0;
};

// nullopt with *error set for an invalid shape or sharding.
std::optional<Estimate> MakeEstimate(const RunShape& run, const EstimateOptions& options,
                                     std::string* error);

// "1T", "300B", "2.5e12", "500M", "1e9" -> tokens; nullopt when malformed or <= 0.
std::optional<double> ParseTokenCount(const std::string& text);

}  // namespace hypertrain::contract
