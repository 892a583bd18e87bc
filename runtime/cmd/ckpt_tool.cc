// hypertrain-ckpt: inspect and convert checkpoints.
//   hypertrain-ckpt list <checkpoint_dir>          steps, world layout, status
//   hypertrain-ckpt verify <step_dir>              full check (sizes, headers, crc32c)
//   hypertrain-ckpt export-hf <step_dir> <out_dir> [--dtype bf16|fp32]
//                                                  config.json + model.safetensors
// Exit codes: 0 ok, 2 usage, 3 corrupt / not found.
#include <cstdio>
#include <string>

#include <spdlog/spdlog.h>

#include "core/cli.h"
#include "core/log.h"
#include "runtime/ckpt/hf_export.h"
#include "runtime/ckpt/store.h"

namespace hypertrain::ckpt {
namespace {

int Fail(const Status& s) {
  spdlog::error("{}", s.ToString());
  return s.code() == StatusCode::kInvalidArgument ? cli::kUsageError : 3;
}

int List(const std::string& dir) {
  auto all = ListCheckpoints(dir);
  if (all.empty()) std::printf("no checkpoints in %s\n", dir.c_str());
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

int Verify(const std::string& step_dir) {
  auto m = VerifyCheckpoint(step_dir, true);
  if (!m.ok()) return Fail(m.status());
  std::printf("ok: step %lld, %zu shard files\n", static_cast<long long>(m->step), m->files.size());
  return 0;
}

int ExportHf(const std::string& step_dir, const std::string& out_dir, const std::string& dtype) {
  auto m = VerifyCheckpoint(step_dir, true);
  if (!m.ok()) return Fail(m.status());
  auto cfg = ModelConfigFromHf(m->model_config);
  if (!cfg.ok()) return Fail(cfg.status());
  auto reader = CheckpointReader::Open(step_dir, *m);
  if (!reader.ok()) return Fail(reader.status());
  Status s = ExportHfFromCheckpoint(*reader, *cfg, out_dir, dtype == "bf16" ? StDType::kBF16 : StDType::kF32);
  if (!s.ok()) return Fail(s);
  std::printf("exported step %lld to %s (%s)\n", static_cast<long long>(m->step), out_dir.c_str(), dtype.c_str());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"Inspect and convert hypertrain checkpoints.", "hypertrain-ckpt"};
  cli::UseHelpFormatter(app);
  cli::AddVersionFlag(app);
  app.require_subcommand(1);
  std::string dir, step_dir, out_dir, dtype = "bf16";
  CLI::App* list = app.add_subcommand("list", "every step-N under a checkpoint directory: step, world layout, status");
  list->add_option("checkpoint_dir", dir, "the checkpoint directory")->required();
  CLI::App* verify = app.add_subcommand("verify", "full check of one step directory (sizes, headers, crc32c)");
  verify->add_option("step_dir", step_dir, "a step-N directory")->required();
  CLI::App* hf = app.add_subcommand("export-hf", "a step as a Hugging Face Llama (config.json + model.safetensors)");
  hf->add_option("step_dir", step_dir, "a step-N directory")->required();
  hf->add_option("out_dir", out_dir, "where the model goes")->required();
  // The old third positional ([bf16|fp32]) still works beside --dtype.
  hf->add_option("dtype,--dtype", dtype, "weights' dtype")->check(cli::OneOf({"bf16", "fp32"}))->capture_default_str();
  if (std::optional<int> rc = cli::Parse(app, argc, argv)) return *rc;
  if (list->parsed()) return List(dir);
  if (verify->parsed()) return Verify(step_dir);
  return ExportHf(step_dir, out_dir, dtype);
}

}  // namespace
}  // namespace hypertrain::ckpt

int main(int argc, char** argv) {
  // Results go to stdout; errors and the checkpoint code's warnings to stderr.
  hypertrain::log::Init(hypertrain::log::Format::kText, spdlog::level::info);
  return hypertrain::ckpt::Main(argc, argv);
}
