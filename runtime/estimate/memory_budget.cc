#include "runtime/estimate/memory_budget.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "contract/estimate.h"
#include "runtime/estimate/estimate.h"

namespace hypertrain::estimate {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A "Key:   N kB" line of /proc/self/status or /proc/meminfo, in bytes; -1.
int64_t ProcKb(const char* file, const std::string& key) {
  std::ifstream f(file);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream in(line.substr(key.size() + 1));
    int64_t kb = -1;
    in >> kb;
    return kb < 0 ? -1 : kb * 1024;
  }
  return -1;
}

// cgroup v2 memory.max of this process's group (one line "max" when none).
int64_t CgroupMax() {
  std::ifstream cg("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return -1;
  std::ifstream f("/sys/fs/cgroup" + path + "/memory.max");
  std::string v;
  if (!(f >> v) || v == "max") return -1;
  try {
    return std::stoll(v);
  } catch (...) {
    return -1;
  }
}

void Lower(HostBudget* b, int64_t bytes, const std::string& source) {
  if (bytes <= 0) return;
  if (b->bytes == 0 || bytes < b->bytes) *b = {bytes, source};
}

}  // namespace

HostBudget HostMemoryBudget(int64_t local_ranks) {
  HostBudget b;
  local_ranks = std::max<int64_t>(1, local_ranks);
  const std::string share = local_ranks > 1 ? fmt::format(" / {} ranks on this node", local_ranks) : "";
  if (const int64_t total = ProcKb("/proc/meminfo", "MemTotal"); total > 0) {
    Lower(&b, total / local_ranks, "the node's MemTotal" + share);
  }
  if (const int64_t cg = CgroupMax(); cg > 0) Lower(&b, cg / local_ranks, "the cgroup's memory.max" + share);
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const int64_t mapped = std::max<int64_t>(0, ProcKb("/proc/self/status", "VmSize"));
    Lower(&b, static_cast<int64_t>(lim.rlim_cur) - mapped, "RLIMIT_AS (ulimit -v) less what is mapped");
  }
  if (::getrlimit(RLIMIT_DATA, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    Lower(&b, static_cast<int64_t>(lim.rlim_cur), "RLIMIT_DATA (ulimit -d)");
  }
  return b;
}

Status CheckCpuMemoryPlan(const config::TrainConfig& c, int64_t nodes, int64_t ranks_per_node,
                          const HostBudget& budget) {
  if (budget.bytes <= 0) return Status::Ok();
  config::TrainConfig cpu = c;
  cpu.backend = "cpu";
  StatusOr<contract::RunShape> run = RunShapeFromConfig(cpu, {.nodes = nodes, .gpus_per_node = ranks_per_node},
                                                        nullptr);
  // A shape the plan cannot use fails later with its own message.
  if (!run.ok() || !contract::ValidateRunShape(*run).empty()) return Status::Ok();
  std::string error;
  const std::optional<contract::ShardingPlan> plan = contract::PlanSharding(*run, &error);
  if (!plan) return Status::Ok();
  const contract::MemoryParts m = contract::EstimateMemory(*run, *plan);
  if (m.peak() <= budget.bytes) return Status::Ok();
  const int64_t state = m.weights + m.master + m.gradients + m.optimizer + m.unit_pool + m.frozen_base;
  const int64_t acts = m.peak() - state;
  const model::ModelConfig& mc = c.model;
  std::string cause;
  if (state >= acts) {
    cause = fmt::format("the model's weights, gradients and AdamW state take {:.1f} GiB ({}{:.2f} B parameters: "
                        "model.hidden_size={}, model.num_hidden_layers={}, model.vocab_size={}, "
                        "model.intermediate_size={})",
                        state / kGiB, c.shape.empty() ? "" : fmt::format("model.shape={}, ", c.shape),
                        contract::CountParams(run->model).total / 1e9, mc.hidden_size, mc.num_hidden_layers,
                        mc.vocab_size, mc.intermediate_size);
  } else {
    cause = fmt::format("activations take {:.1f} GiB (model.train_batch_size={} x model.max_context_width={} "
                        "tokens per micro-batch, model.num_hidden_layers={}, model.hidden_size={})",
                        acts / kGiB, c.train_batch_size, c.seq_len(), mc.num_hidden_layers, mc.hidden_size);
  }
  return InvalidArgument(fmt::format(
      "the CPU backend's memory plan needs {:.1f} GiB per rank, more than the {:.1f} GiB this process may use "
      "({}): {}; `hypertrain estimate` shows the plan by part",
      m.peak() / kGiB, budget.bytes / kGiB, budget.source, cause));
}

}  // namespace hypertrain::estimate
