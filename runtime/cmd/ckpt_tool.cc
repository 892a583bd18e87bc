// hypertrain-ckpt: inspect and convert checkpoints.
//   hypertrain-ckpt list <checkpoint_dir>          steps, world layout, status
//   hypertrain-ckpt verify <step_dir>              full check (sizes, headers, crc32c)
//   hypertrain-ckpt export-hf <step_dir> <out_dir> [bf16|fp32]
//                                                  config.json + model.safetensors
// Exit codes: 0 ok, 2 usage, 3 corrupt / not found.
#include <cstdio>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "core/log.h"
#include "runtime/ckpt/hf_export.h"
#include "runtime/ckpt/store.h"

namespace hypertrain::ckpt {
namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: hypertrain-ckpt list <checkpoint_dir>\n"
               "       hypertrain-ckpt verify <step_dir>\n"
               "       hypertrain-ckpt export-hf <step_dir> <out_dir> [bf16|fp32]\n");
  return 2;
}

int Fail(const Status& s) {
  spdlog::error("{}", s.ToString());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 3;
}

int Main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string cmd = argv[1];
  if (cmd == "list") {
    auto all = ListCheckpoints(argv[2]);
    if (all.empty()) std::printf("no checkpoints in %s\n", argv[2]);
    for (const auto& [step, path] : all) {
      auto m = VerifyCheckpoint(path, false);
      if (m.ok()) {
        std::printf("%-10lld %s  world %d (shard %d x replica %d, %s)  tokens %lld  %s\n",
                    static_cast<long long>(step), path.c_str(), m->world.world_size, m->world.shard_degree,
                    m->world.replica_degree, m->world.strategy.c_str(), static_cast<long long>(m->tokens_seen),
                    m->created_utc.c_str());
      } else {
        std::printf("%-10lld %s  INVALID: %s\n", static_cast<long long>(step), path.c_str(),
                    m.status().ToString().c_str());
      }
    }
    return 0;
  }
  if (cmd == "verify") {
    auto m = VerifyCheckpoint(argv[2], true);
    if (!m.ok()) return Fail(m.status());
    std::printf("ok: step %lld, %zu shard files\n", static_cast<long long>(m->step), m->files.size());
    return 0;
  }
  if (cmd == "export-hf") {
    if (argc < 4) return Usage();
    const std::string dtype = argc > 4 ? argv[4] : "bf16";
    if (dtype != "bf16" && dtype != "fp32") return Usage();
    auto m = VerifyCheckpoint(argv[2], true);
    if (!m.ok()) return Fail(m.status());
    auto cfg = ModelConfigFromHf(m->model_config);
    if (!cfg.ok()) return Fail(cfg.status());
    auto reader = CheckpointReader::Open(argv[2], *m);
    if (!reader.ok()) return Fail(reader.status());
    Status s = ExportHfFromCheckpoint(*reader, *cfg, argv[3], dtype == "bf16" ? StDType::kBF16 : StDType::kF32);
    if (!s.ok()) return Fail(s);
    std::printf("exported step %lld to %s (%s)\n", static_cast<long long>(m->step), argv[3], dtype.c_str());
    return 0;
  }
  return Usage();
}

}  // namespace
}  // namespace hypertrain::ckpt

int main(int argc, char** argv) {
  // Results go to stdout; errors and the checkpoint code's warnings to stderr.
  hypertrain::log::Init(hypertrain::log::Format::kText, spdlog::level::info);
  return hypertrain::ckpt::Main(argc, argv);
}
