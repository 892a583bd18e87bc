// The memory half of contract/estimate.h: the unit layout's sizes and the
// backends' allocation plans, replayed without a device. Each block below
// names the code it mirrors; estimate_test (CPU, real allocations) and
// runtime/estimate's GPU test (the CUDA backend's counters) keep them honest.
#include <algorithm>
#include <string>
#include <utility>

#include "contract/estimate.h"

namespace hypertrain::contract {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Sizes a ParamLayout unit from its tensors' numels (runtime/model/layout.cc:
// each tensor starts at a multiple of the alignment, the unit is padded).
struct UnitBuilder {
  int64_t align;
  int64_t cursor = 0;
  void Add(int64_t numel) { cursor = RoundUp(cursor, align) + numel; }
};

// ---- CPU backend (runtime/backends/cpu/backend.cc Create, model.cc) --------

// Floats of CpuModel's one activation allocation: the recompute scratch
// (always), per block what the mode keeps, then the final norm and the
// backward's gradient buffers.
int64_t CpuActivationFloats(const ModelShape& m, int64_t N, Checkpointing c) {
  const int64_t C = m.hidden_size, Q = m.q_dim(), K = m.kv_dim(), F = m.intermediate_size,
                H = m.num_attention_heads, L = m.num_hidden_layers;
  const bool none = c == Checkpointing::kNone, keep = none || c == Checkpointing::kSelective;
  const int64_t scratch = 3 * N * C + 2 * N + 2 * N * Q + 2 * N * K + H * N + 3 * N * F;
  int64_t layer = N * C;                                           // x
  if (none) layer += 2 * N * C + 2 * N + N * F;                    // ln1, rstd1, ln2, rstd2, act
  if (keep) layer += 2 * N * Q + 2 * N * K + H * N + N * C + 2 * N * F;  // q k v att lse h gate up
  const int64_t tail = 3 * N * C + N      // x_final, ln_f, rstd_f, dln_f
                       + 3 * N * C        // dres, dh, dln
                       + 2 * N * Q + 2 * N * K + 3 * N * F;  // datt dq dk dv dact dgate dup
  return scratch + L * layer + tail;
}

MemoryParts CpuMemory(const RunShape& run, const ShardingPlan& plan) {
  const ModelShape& m = run.model;
  const UnitSizes u = LayoutUnits(m, 64, plan.pad_multiple);
  const int64_t L = m.num_hidden_layers, N = run.micro_batch * run.seq_len, f = 4;
  const int64_t D = plan.shard_degree;
  MemoryParts p;
  const int64_t padded[2] = {u.embedding_padded, u.block_padded};
  const int64_t count[2] = {1, L};
  for (int k = 0; k < 2; ++k) {
    const int64_t P = padded[k], r = plan.pooled ? P / D : P;
    p.weights += count[k] * f * (plan.pooled ? r : P);  // params_ (the master aliases them)
    if (!plan.pooled) p.gradients += count[k] * f * P;  // grads_
    if (r != P) p.gradients += count[k] * f * r;        // shard_grads_
    p.optimizer += count[k] * 2 * f * r;                // m_, v_
  }
  if (plan.pooled) {  // model::PlanUnitPool: embedding 1 + 1 slots, blocks N + 2
    p.unit_pool = f * (2 * u.embedding_padded + (plan.param_slots + 2) * u.block_padded);
  }
  p.activations = f * CpuActivationFloats(m, N, run.checkpointing);
  p.buffers = 4 * N                                // tokens_
              + 2 * f * run.seq_len * m.head_dim() / 2;  // RoPE cos/sin tables
  if (plan.pooled && SplitsEmbeddingGrad(D, N, m.vocab_size)) {  // hsdp.cc ShardedBackendOptions
    p.embedding_gather = D * N * 4 + D * N * m.hidden_size * f;
  }
  p.loss_chunk_rows = std::min<int64_t>(256, N);  // ops.h FusedClassifier's default
  p.transient = p.loss_chunk_rows * m.vocab_size * f;
  return p;
}

// ---- CUDA backend (runtime/backends/cuda/backend.cc Init, step.cc) ---------

int64_t PlanRound(int64_t b) { return RoundUp(b, 256); }  // step.cc PlanRoundUp
int64_t Alloc(int64_t b) { return std::max<int64_t>(b, 256); }  // CudaBackend::Alloc

constexpr int64_t kGemmWorkspace = 32 * kMiB;            // kernels/cuda/gemm.h
constexpr int64_t kCudnnWorkspaceCap = 2048 * kMiB;       // attention_cudnn.cc default
constexpr int64_t kSumSquaresPartials = 1024;             // kernels/cuda/reduce.h
constexpr int64_t kRmsNormScratchRows = 256;              // rmsnorm.cu max(kDwGroups, kFusedBlocksSmall)
constexpr int64_t kStagingSlots = 16;                     // CudaOptions::staging_slots
constexpr int64_t kLogitsFloor = kGiB;                    // step.cc: at least 1 GiB of logits
// Not allocated by the backend but resident (cudaMemGetInfo "in use" minus
// "allocated"): CUDA context + cuBLASLt/cuDNN handles and plans, 0.69-0.73 GiB
// in every single-GPU run of docs/PERF.md; each NCCL communicator of more than
// one rank adds its buffers, ~0.8 GiB on the 2- and 4-GPU H200 runs there.
constexpr int64_t kCudaContext = 740 * kMiB;
constexpr int64_t kNcclCommunicator = 820 * kMiB;

// kernels/cuda/embedding.cu EmbeddingBackwardScratchBytes: 3 int32 arrays +
// CUB's radix-sort temporary storage (its alternate keys and values + a
// small histogram area).
int64_t EmbeddingScratch(int64_t n) { return 3 * PlanRound(4 * n) + PlanRound(8 * n + 64 * 1024); }

int64_t DTypeBytes(Precision p) {
  return p == Precision::kBF16 || p == Precision::kFP16 ? 2 : 4;
}

MemoryParts CudaMemory(const RunShape& run, const ShardingPlan& plan) {
  const ModelShape& m = run.model;
  const UnitSizes u = LayoutUnits(m, 64, plan.pad_multiple);
  const int64_t es = DTypeBytes(run.precision);
  const int64_t B = run.micro_batch, S = run.seq_len, N = B * S;
  const int64_t C = m.hidden_size, Q = m.q_dim(), K = m.kv_dim(), F = m.intermediate_size,
                L = m.num_hidden_layers, V = m.vocab_size, H = m.num_attention_heads,
                D = m.head_dim();
  const int64_t SD = plan.shard_degree;
  MemoryParts p;

  // Init: per unit state; shared block gradients are placed by the plan.
  const bool shared = run.grad_accumulation == 1 && !plan.pooled && L >= 2;
  const int64_t padded[2] = {u.embedding_padded, u.block_padded};
  const int64_t count[2] = {1, L};
  for (int k = 0; k < 2; ++k) {
    const int64_t P = padded[k], r = plan.pooled ? P / SD : P;
    if (plan.pooled) {
      p.gradients += count[k] * Alloc(r * 4);  // shard grads
      p.weights += count[k] * Alloc(r * es);   // compute shard
      p.cuda_state += count[k] * r * (4 + es);
    } else {
      if (!shared || k == 0) {
        p.gradients += count[k] * Alloc(P * 4);
        p.cuda_state += count[k] * P * 4;
      }
      p.weights += count[k] * Alloc(P * es);
      p.cuda_state += count[k] * P * es;
    }
    p.master += count[k] * Alloc(r * 4);
    p.optimizer += count[k] * 2 * Alloc(r * 4);
    p.cuda_state += count[k] * 3 * r * 4;
  }
  if (plan.pooled) {  // model::PlanUnitPool
    p.unit_pool = Alloc(u.embedding_padded * es) + Alloc(u.embedding_padded * 4) +
                  plan.param_slots * Alloc(u.block_padded * es) + 2 * Alloc(u.block_padded * 4);
  }
  const int64_t slots = std::max<int64_t>(kStagingSlots, run.prefetch_depth + 2);
  p.buffers += kGemmWorkspace + slots * 2 * Alloc(N * 4);

  // PlanActivations.
  const AttentionWorkspace aw = AttentionWorkspaceBytes(m, B, S, run.precision, run.deterministic);
  p.attention_workspace = aw.bytes;
  p.attention_batch_chunk = aw.batch_chunk;
  const bool att_in_gu = PlanRound(N * Q * es) + N * (Q + 2 * K) * es <= N * 2 * F * es;
  const int64_t dact = PlanRound(N * std::max(F, Q) * es);
  const int64_t dgu = PlanRound(N * std::max(2 * F, Q + 2 * K) * es);
  const int64_t dead = att_in_gu ? std::max(dact + dgu, PlanRound(aw.bytes))
                                 : dact + dgu + PlanRound(aw.bytes);
  const int64_t fit = std::max<int64_t>(std::max(dead, kLogitsFloor) / (V * es), 1);
  const int64_t chunks = (N + fit - 1) / fit;
  p.loss_chunk_rows = (N + chunks - 1) / chunks;
  const int64_t emb_ranks = plan.pooled && SplitsEmbeddingGrad(SD, N, V) ? SD : 0;
  const bool none = run.checkpointing == Checkpointing::kNone;
  const bool keep = none || run.checkpointing == Checkpointing::kSelective;
  auto act = [&](int64_t n) { return PlanRound(n * es); };
  auto f32 = [&](int64_t n) { return PlanRound(n * 4); };
  int64_t scratch = 0, layer = act(N * C);
  const int64_t recomputed = act(N * C) + f32(N) + act(N * C) + f32(N) + act(N * F);
  const int64_t gemm_outputs = act(N * (Q + 2 * K)) + act(N * Q) + f32(N * H) + act(N * C) +
                               act(N * 2 * F);
  (none ? layer : scratch) += recomputed;
  (keep ? layer : scratch) += gemm_outputs;
  const int64_t grad_bytes = PlanRound(u.block_padded * 4);
  p.grads_share_activations = shared && layer >= grad_bytes;
  if (shared && !p.grads_share_activations) {  // full checkpointing keeps too little per layer
    p.gradients += L * Alloc(u.block_padded * 4);
    p.cuda_state += L * u.block_padded * 4;
  }
  p.activations = scratch + L * layer + 4 * act(N * C) + f32(N);  // + x_final ln_f rstd_f dres dln
  const int64_t shared_slot = p.grads_share_activations ? grad_bytes : 0;
  p.workspace = PlanRound(std::max(dead, p.loss_chunk_rows * V * es));
  const int64_t small = f32(N)                                   // losses
                        + f32(kRmsNormScratchRows * C) + f32(S * D) + f32(1)  // norm, RoPE, dscale
                        + PlanRound(8) + PlanRound(8 * kSumSquaresPartials * u.num_units) +
                        PlanRound(8) + 2 * PlanRound(4 * N)      // tokens, targets
                        + EmbeddingScratch(N * std::max<int64_t>(emb_ranks, 1));
  p.embedding_gather = emb_ranks > 1 ? PlanRound(emb_ranks * N * 4) + act(emb_ranks * N * C) : 0;
  p.cuda_activation_plan = p.activations + shared_slot + p.workspace + small + p.embedding_gather;
  p.gradients += shared_slot;
  p.buffers += small;
  p.overhead = kCudaContext + plan.nccl_communicators * kNcclCommunicator;
  return p;
}

// ---- PEFT (runtime/backends/*: the adapter layout, the base store) --------

// (out, in) features of a projection by its PEFT module name.
std::pair<int64_t, int64_t> ProjectionShape(const ModelShape& m, const std::string& name) {
  const int64_t C = m.hidden_size, F = m.intermediate_size;
  if (name == "q_proj") return {m.q_dim(), C};
  if (name == "k_proj" || name == "v_proj") return {m.kv_dim(), C};
  if (name == "o_proj") return {C, m.q_dim()};
  if (name == "gate_proj" || name == "up_proj") return {F, C};
  if (name == "down_proj") return {C, F};
  return {0, 0};
}

// model::Nf4Tensor::bytes(): 4-bit codes, an 8-bit scale code per block of
// 64, an fp32 absmax per 256 blocks, the fp32 offset.
int64_t Nf4Bytes(int64_t n) {
  const int64_t blocks = (n + 63) / 64;
  return (n + 1) / 2 + blocks + (blocks + 255) / 256 * 4 + 4;
}

MemoryParts PeftMemory(const RunShape& run, const ShardingPlan& plan) {
  const ModelShape& m = run.model;
  const bool cpu = run.device == Device::kCpu;
  const bool qlora = run.peft.type == "qlora";
  // The activations and workspaces of the same pass: the full model's plan
  // (no weight gradients share dead activations with PEFT; the base is never
  // pooled like HSDP's units).
  RunShape whole = run;
  whole.peft = {};
  whole.grad_accumulation = std::max<int64_t>(2, run.grad_accumulation);  // no shared block grads
  ShardingPlan unpooled = plan;
  unpooled.pooled = false;
  unpooled.pad_multiple = 1;
  MemoryParts p = cpu ? CpuMemory(whole, unpooled) : CudaMemory(whole, unpooled);
  const int64_t es = cpu ? 4 : DTypeBytes(run.precision), L = m.num_hidden_layers;
  const int64_t N = run.micro_batch * run.seq_len, S = plan.shard_degree;
  // Adapters: whole on every rank (compute copy on CUDA, fp32 master =
  // params on the CPU, fp32 grads, m, v).
  int64_t adapter = 0, lora_t = 0;
  for (const std::string& t : run.peft.targets) {
    const auto [out, in] = ProjectionShape(m, t);
    adapter += RoundUp(run.peft.rank * in, 64) + RoundUp(out * run.peft.rank, 64);
    lora_t += N * run.peft.rank;
  }
  adapter *= L;
  p.weights = cpu ? 4 * adapter : adapter * es;
  p.master = cpu ? 0 : 4 * adapter;
  p.gradients = 4 * adapter;
  p.optimizer = 8 * adapter;
  p.unit_pool = 0;
  p.embedding_gather = 0;
  if (!cpu) p.activations += L * lora_t * es;  // each layer keeps its adapters' t
  // The base store per unit, and what one rank keeps of it. A QLoRA block
  // on CUDA: its norms and NF4 projections (model::Nf4Tensor::bytes());
  // sharded, as CudaBackend::BlobLayout lays them out (each piece 256-byte
  // aligned, the fp32 offsets on the host).
  const UnitSizes u = LayoutUnits(m, 64, 1);
  const bool fp8_base = run.peft.fp8_base && !cpu;
  int64_t block = u.block_padded * es;
  // An FP8 base (never sharded: the trainer refuses that): the codes at the
  // layout's offsets and the two norms in the compute dtype.
  if (fp8_base && !qlora) block = u.block_padded + 2 * m.hidden_size * es;
  if (qlora && !cpu) {
    block = S > 1 ? RoundUp(2 * m.hidden_size * es, 256) : 2 * m.hidden_size * es;
    for (const char* t : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
      const auto [out, in] = ProjectionShape(m, t);
      const int64_t n = out * in, blocks = (n + 63) / 64, groups = (blocks + 255) / 256;
      block += S > 1 ? RoundUp((n + 1) / 2, 256) + RoundUp(blocks, 256) + RoundUp(4 * groups, 256)
                     : Nf4Bytes(n);
    }
  }
  const int64_t embedding = u.embedding_padded * es;
  // One rank's slice: CPU ceil(P / S) fp32 values; CUDA the storage bytes
  // in S equal 256-byte-aligned slices (CudaBackend::StoreBaseSlice).
  auto slice = [S, cpu](int64_t bytes) {
    if (S <= 1) return bytes;
    return cpu ? (bytes / 4 + S - 1) / S * 4 : RoundUp((bytes + S - 1) / S, 256);
  };
  p.frozen_base = slice(embedding) + L * slice(block);
  if (S > 1) p.unit_pool = S * slice(embedding) + 2 * S * slice(block);
  if (qlora && !cpu) p.buffers += u.block_padded * es;  // the dequantised block
  // FP8 base: amax | scale | scale_inv per (layer, GEMM), 256 bytes apart;
  // QLoRA's block of codes beside its dequantised block.
  const int64_t fp8_state = fp8_base ? L * 4 * 3 * 256 + (qlora ? u.block_padded : 0) : 0;
  p.buffers += fp8_state;
  p.cuda_state = cpu ? 0
                     : p.weights + p.master + p.gradients + p.optimizer + p.frozen_base +
                           (qlora ? u.block_padded * es : 0) + fp8_state;
  return p;
}

}  // namespace

UnitSizes LayoutUnits(const ModelShape& m, int64_t tensor_alignment, int64_t pad_multiple) {
  const int64_t C = m.hidden_size, V = m.vocab_size, F = m.intermediate_size;
  UnitSizes s;
  UnitBuilder e{tensor_alignment};
  e.Add(V * C);
  e.Add(C);
  if (!m.tie_word_embeddings) e.Add(V * C);
  s.embedding_numel = e.cursor;
  s.embedding_padded = RoundUp(std::max<int64_t>(e.cursor, 1), pad_multiple);
  UnitBuilder b{tensor_alignment};
  for (int64_t n : {C, m.q_dim() * C, m.kv_dim() * C, m.kv_dim() * C, C * m.q_dim(), C, F * C,
                    F * C, C * F}) {
    b.Add(n);
  }
  s.block_numel = b.cursor;
  s.block_padded = RoundUp(std::max<int64_t>(b.cursor, 1), pad_multiple);
  s.num_units = 1 + m.num_hidden_layers;
  return s;
}

AttentionWorkspace AttentionWorkspaceBytes(const ModelShape& m, int64_t batch, int64_t seq,
                                           Precision precision, bool deterministic) {
  const int64_t H = m.num_attention_heads, D = m.head_dim();
  // Ours (tiled, and the fp32 kernels' scratch): 4 B H S.
  const int64_t ours = PlanRound(4 * batch * H * seq);
  const bool cudnn = DTypeBytes(precision) == 2 && (D == 64 || D == 128);
  if (!cudnn) return {ours, batch};
  auto one_call = [&](int64_t b) {
    const int64_t sums = PlanRound(4 * b * H * seq);
    if (!deterministic) return sums + PlanRound(4 * b * H * seq * D) + PlanRound(21 * b * H * seq * D);
    return sums + PlanRound(2 * b * H * seq * seq + 4 * b * seq * H * D);
  };
  int64_t cb = batch;
  while (deterministic && cb > 1 && one_call(cb) > kCudnnWorkspaceCap) {
    do {
      --cb;
    } while (batch % cb != 0);
  }
  return {std::max(ours, one_call(cb)), cb};
}

MemoryParts EstimateMemory(const RunShape& run, const ShardingPlan& plan) {
  if (!run.peft.type.empty()) return PeftMemory(run, plan);
  return run.device == Device::kCpu ? CpuMemory(run, plan) : CudaMemory(run, plan);
}

}  // namespace hypertrain::contract
