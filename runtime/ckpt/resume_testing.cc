#include "runtime/ckpt/resume_testing.h"

#include <filesystem>
#include <memory>

#include "core/atomic_file.h"
#include "runtime/ckpt/store.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/train/trainer.h"

namespace hypertrain::ckpt::testing {
namespace {

namespace fs = std::filesystem;

int64_t g_stop_at = -1;

class StoppingHooks final : public train::CheckpointHooks {
 public:
  StoppingHooks(std::unique_ptr<TrainCheckpointHooks> inner, int64_t stop_at)
      : inner_(std::move(inner)), stop_at_(stop_at) {}
  StatusOr<bool> Restore(model::Backend& b, train::TrainState& s) override { return inner_->Restore(b, s); }
  Status AfterStep(model::Backend& b, const train::TrainState& s) override {
    HT_RETURN_IF_ERROR(inner_->AfterStep(b, s));
    if (s.step == stop_at_) return Unavailable("simulated stop after step " + std::to_string(s.step));
    return Status::Ok();
  }
  Status Finish(model::Backend& b, const train::TrainState& s) override { return inner_->Finish(b, s); }

 private:
  std::unique_ptr<TrainCheckpointHooks> inner_;
  int64_t stop_at_;
};

const bool kFactory = train::SetCheckpointFactory(
    [](const config::TrainConfig& c, train::ParallelRuntime& p) -> StatusOr<std::unique_ptr<train::CheckpointHooks>> {
      HT_ASSIGN_OR_RETURN(CheckpointOptions o, OptionsFromConfig(c));
      HT_ASSIGN_OR_RETURN(RankPlacement placement, PlacementFor(c, p.rank(), p.world_size()));
      auto inner = std::make_unique<TrainCheckpointHooks>(c, std::move(o), placement);
      return std::unique_ptr<train::CheckpointHooks>(std::make_unique<StoppingHooks>(std::move(inner), g_stop_at));
    });

}  // namespace

void SetStopAfterStep(int64_t step) { g_stop_at = step; }

std::string FreshTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  auto p = fs::path(base ? base : "/tmp") / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string ShardBytes(const std::string& exp, int64_t step) {
  return *ReadFileToString(exp + "/checkpoints/step-" + std::to_string(step) + "/shard-00000-of-00001.bin");
}

}  // namespace hypertrain::ckpt::testing
