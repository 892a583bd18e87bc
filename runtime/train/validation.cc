#include "runtime/train/validation.h"

#include <chrono>

namespace hypertrain::train {

Validator::Validator(const config::TrainConfig& c, const data::LoaderOptions& train, data::HostAllocator* allocator,
                     data::BatchStager* stager)
    : options_(train), allocator_(allocator), stager_(stager) {
  options_.train_dir = c.validation.val_dir;
  options_.dir_key = "model.data.val_dir";
  options_.synthetic = false;
  options_.grad_accum = 1;
  options_.prefetch_depth = 1;
  options_.state = data::SamplerState();
  options_.state.seed = c.seed;
  const int64_t sequences = c.validation.limit_batches * c.validation.batch_size;
  passes_ = (sequences + c.train_batch_size - 1) / c.train_batch_size;
}

Status Validator::Check() const {
  return data::DataLoader::Create(options_, allocator_, stager_).status();
}

StatusOr<ValMetrics> Validator::Run(int64_t step, model::Backend& backend, model::UnitHooks& hooks) {
  const auto t0 = std::chrono::steady_clock::now();
  HT_ASSIGN_OR_RETURN(std::unique_ptr<data::DataLoader> loader,
                      data::DataLoader::Create(options_, allocator_, stager_));
  double local = 0;
  for (int64_t i = 0; i < passes_; ++i) {
    HT_ASSIGN_OR_RETURN(data::Batch * batch, loader->Next());
    StatusOr<double> l = backend.Loss(batch->view, hooks);
    loader->Release(batch);
    if (!l.ok()) return l.status();
    local += *l / static_cast<double>(passes_);
  }
  ValMetrics m;
  m.step = step;
  HT_ASSIGN_OR_RETURN(m.loss, hooks.MeanAcrossDataParallel(local));
  m.batches = passes_;
  m.tokens = passes_ * options_.micro_batch * options_.seq * options_.dp_world;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace hypertrain::train
