#include "tests/ckpt/resume_testing.h"

#include <filesystem>
#include <memory>

#include "core/atomic_file.h"
#include "runtime/ckpt/store.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/cmd/assemble.h"
#include "runtime/train/trainer.h"

namespace hypertrain::ckpt::testing {
namespace {

namespace fs = std::filesystem;

class StoppingHooks final : public train::CheckpointHooks {
 public:
  StoppingHooks(std::unique_ptr<train::CheckpointHooks> inner, int64_t stop_at)
      : inner_(std::move(inner)), stop_at_(stop_at) {}
  StatusOr<bool> Restore(model::Backend& b, train::TrainState& s) override { return inner_->Restore(b, s); }
  Status AfterStep(model::Backend& b, const train::TrainState& s) override {
    HT_RETURN_IF_ERROR(inner_->AfterStep(b, s));
    if (s.step == stop_at_) return Unavailable("simulated stop after step " + std::to_string(s.step));
    return Status::Ok();
  }
  Status Finish(model::Backend& b, const train::TrainState& s) override { return inner_->Finish(b, s); }

 private:
  std::unique_ptr<train::CheckpointHooks> inner_;
  int64_t stop_at_;
};

}  // namespace

StatusOr<train::TrainSummary> RunJob(const config::TrainConfig& c, int64_t stop_after_step) {
  HT_ASSIGN_OR_RETURN(train::TrainParts parts, cmd::AssembleTrainJob(c, ProcessEnvironment()));
  parts.checkpoint = std::make_unique<StoppingHooks>(std::move(parts.checkpoint), stop_after_step);
  return train::RunTrainJob(c, std::move(parts));
}

std::string FreshTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");  // raw getenv: Bazel's test scratch dir, a test helper
  auto p = fs::path(base ? base : "/tmp") / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string ShardBytes(const std::string& exp, int64_t step) {
  return *ReadFileToString(exp + "/checkpoints/step-" + std::to_string(step) + "/shard-00000-of-00001.bin");
}

}  // namespace hypertrain::ckpt::testing
