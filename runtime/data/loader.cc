#include "runtime/data/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "runtime/data/arrow/hf_dataset.h"
#include "runtime/data/manifest.h"
#include "runtime/model/init.h"

namespace hypertrain::data {
namespace {

class NewDeleteAllocator final : public HostAllocator {
 public:
  void* Allocate(size_t bytes) override { return ::operator new(bytes); }
  void Free(void* p) override { ::operator delete(p); }
};

constexpr int64_t kSyntheticSamples = int64_t{1} << 40;

}  // namespace

StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(const LoaderOptions& o,
                                                         HostAllocator* allocator,
                                                         BatchStager* stager) {
  if (o.micro_batch < 1 || o.seq < 1 || o.grad_accum < 1) {
    return InvalidArgument(fmt::format("data: micro_batch ({}), seq ({}) and grad_accum ({}) must be >= 1",
                                       o.micro_batch, o.seq, o.grad_accum));
  }
  if (o.dp_world < 1 || o.rank < 0 || o.rank >= o.dp_world) {
    return InvalidArgument(fmt::format("data: rank {} not in [0, {})", o.rank, o.dp_world));
  }
  if (o.prefetch_depth < 1) {
    return InvalidArgument(fmt::format("model.data.prefetch_depth must be >= 1, got {}", o.prefetch_depth));
  }
  std::unique_ptr<DataLoader> d(new DataLoader());
  d->options_ = o;
  if (allocator == nullptr) {
    d->default_allocator_ = std::make_unique<NewDeleteAllocator>();
    allocator = d->default_allocator_.get();
  }
  d->allocator_ = allocator;
  d->stager_ = stager;
  if (o.synthetic) {
    d->num_samples_ = kSyntheticSamples;
  } else {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (o.train_dir.empty()) {
      return InvalidArgument("model.data.train_dir is empty and use_synthetic_data is false");
    }
    if (!fs::is_directory(o.train_dir, ec)) {
      return NotFound(fmt::format("{} '{}' is not a directory", o.dir_key, o.train_dir));
    }
    auto add = [&](std::unique_ptr<TokenFile> f) {
      d->file_starts_.push_back(d->num_tokens_);
      d->num_tokens_ += f->num_tokens();
      d->files_.push_back(std::move(f));
    };
    if (sft::IsSftDataset(o.train_dir)) {
      HT_ASSIGN_OR_RETURN(d->sft_, sft::Dataset::Open(o.train_dir));
      const nlohmann::json& m = d->sft_->manifest();
      if (d->sft_->vocab_size() > static_cast<uint32_t>(o.vocab_size)) {
        return InvalidArgument(fmt::format("{} was tokenized for vocab_size {} but model.vocab_size is {}",
                                           o.train_dir, d->sft_->vocab_size(), o.vocab_size));
      }
      const std::string sha = m.contains("tokenizer") ? m["tokenizer"].value("sha256", std::string()) : "";
      if (!o.tokenizer_sha256.empty() && sha != o.tokenizer_sha256) {
        return InvalidArgument(fmt::format("{} was made with another tokenizer (sha256 {}) than "
                                           "model.data.tokenizer (sha256 {})",
                                           o.train_dir, sha, o.tokenizer_sha256));
      }
      sft::PackPlan plan = sft::PackBestFit(*d->sft_, o.seq);
      if (plan.rows.empty()) {
        return InvalidArgument(fmt::format("{}: no sample of at least 2 tokens", o.train_dir));
      }
      d->sft_rows_ = std::move(plan.rows);
      d->num_tokens_ = d->sft_->num_tokens();
      d->num_samples_ = static_cast<int64_t>(d->sft_rows_.size());
      d->packing_summary_ = fmt::format(
          "{} samples packed into {} rows of {} ({:.1f}% of positions used, {} truncated, {} "
          "skipped)",
          d->sft_->num_samples(), d->num_samples_, o.seq,
          100.0 * static_cast<double>(plan.used_positions) / (d->num_samples_ * o.seq),
          plan.truncated, plan.skipped);
    } else if (arrow::IsHfDatasetDir(o.train_dir)) {
      HT_ASSIGN_OR_RETURN(std::vector<std::string> arrows, arrow::HfDatasetArrowFiles(o.train_dir, "train"));
      for (const std::string& a : arrows) {
        HT_ASSIGN_OR_RETURN(std::unique_ptr<TokenFile> f, TokenFile::OpenArrow(a, "input_ids"));
        add(std::move(f));
      }
    } else {
      std::vector<std::string> bins;
      for (const auto& e : fs::directory_iterator(o.train_dir, ec)) {
        if (e.path().extension() == ".bin") bins.push_back(e.path().string());
      }
      std::sort(bins.begin(), bins.end());
      if (bins.empty()) {
        return NotFound(fmt::format("{} '{}' has no *.bin token files or Hugging Face dataset "
                                    "(make them with `hypertrain prepare`)",
                                    o.dir_key, o.train_dir));
      }
      HT_ASSIGN_OR_RETURN(std::optional<DataManifest> manifest, ReadManifest(o.train_dir));
      if (manifest) {
        HT_RETURN_IF_ERROR(CheckManifestForModel(*manifest, o.train_dir, o.vocab_size, o.tokenizer_sha256, bins));
      }
      for (const std::string& bin : bins) {
        const std::string prefix = bin.substr(0, bin.size() - 4);
        std::unique_ptr<TokenFile> f;
        if (fs::exists(prefix + ".idx", ec)) {
          HT_ASSIGN_OR_RETURN(f, TokenFile::OpenMegatron(prefix));
        } else {
          HT_ASSIGN_OR_RETURN(f, TokenFile::OpenShard(bin));
        }
        if (f->vocab_size() > o.vocab_size) {
          return InvalidArgument(fmt::format("{} was tokenized for vocab_size {} but model.vocab_size is {}",
                                             bin, f->vocab_size(), o.vocab_size));
        }
        add(std::move(f));
      }
    }
    if (!d->sft_) d->num_samples_ = (d->num_tokens_ - 1) / o.seq;
    if (d->num_samples_ < 1) {
      return InvalidArgument(fmt::format("{} '{}' holds {} tokens; a sample needs "
                                         "seq+1 = {}",
                                         o.dir_key, o.train_dir, d->num_tokens_, o.seq + 1));
    }
  }
  d->sampler_ = std::make_unique<Sampler>(d->num_samples_, o.micro_batch, o.grad_accum, o.rank,
                                          o.dp_world, o.state, !o.synthetic);
  d->consumed_state_ = d->sampler_->state();
  const int64_t n = o.micro_batch * o.seq;
  for (int i = 0; i < o.prefetch_depth + 2; ++i) {
    auto b = std::make_unique<Batch>();
    b->inputs = static_cast<int32_t*>(allocator->Allocate(sizeof(int32_t) * n));
    b->targets = static_cast<int32_t*>(allocator->Allocate(sizeof(int32_t) * n));
    b->view = {b->inputs, b->targets, o.micro_batch, o.seq, nullptr};
    if (d->sft_) {
      b->positions = static_cast<int32_t*>(allocator->Allocate(sizeof(int32_t) * n));
      b->view.positions = b->positions;
    }
    d->free_.push_back(b.get());
    d->pool_.push_back(std::move(b));
  }
  d->thread_ = std::thread([raw = d.get()] { raw->Run(); });
  return d;
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& b : pool_) {
    allocator_->Free(b->inputs);
    allocator_->Free(b->targets);
    if (b->positions != nullptr) allocator_->Free(b->positions);
  }
}

Status DataLoader::Fill(Batch& b, const std::vector<int64_t>& samples) {
  const int64_t T = options_.seq;
  if (sft_) {
    for (size_t r = 0; r < samples.size(); ++r) {
      sft::FillRow(*sft_, sft_rows_[samples[r]], T, options_.ignore_index, b.inputs + r * T,
                   b.targets + r * T, b.positions + r * T);
    }
    for (int64_t i = 0; i < static_cast<int64_t>(samples.size()) * T; ++i) {
      if (b.inputs[i] >= options_.vocab_size) {
        return DataLoss(fmt::format("token id {} in {} is >= model.vocab_size {}", b.inputs[i],
                                    options_.train_dir, options_.vocab_size));
      }
    }
    return Status::Ok();
  }
  std::vector<int32_t> row(T + 1);
  for (size_t r = 0; r < samples.size(); ++r) {
    const int64_t k = samples[r];
    if (options_.synthetic) {
      for (int64_t t = 0; t <= T; ++t) {
        const uint64_t h = model::SplitMix64(model::SplitMix64(options_.state.seed + 0x1234) ^
                                             (static_cast<uint64_t>(k) * (T + 1) + t));
        row[t] = static_cast<int32_t>(h % static_cast<uint64_t>(options_.vocab_size));
      }
    } else {
      int64_t pos = k * T, filled = 0;
      while (filled <= T) {
        const size_t f = std::upper_bound(file_starts_.begin(), file_starts_.end(), pos) -
                         file_starts_.begin() - 1;
        const int64_t local = pos - file_starts_[f];
        const int64_t n = std::min(T + 1 - filled, files_[f]->num_tokens() - local);
        files_[f]->Read(local, n, row.data() + filled);
        filled += n;
        pos += n;
      }
      for (int64_t t = 0; t <= T; ++t) {
        if (row[t] < 0 || row[t] >= options_.vocab_size) {
          return DataLoss(fmt::format("token id {} at stream position {} in {} is >= model.vocab_size {}",
                                      row[t], k * T + t, options_.train_dir, options_.vocab_size));
        }
      }
    }
    std::copy(row.begin(), row.begin() + T, b.inputs + r * T);
    std::copy(row.begin() + 1, row.end(), b.targets + r * T);
  }
  return Status::Ok();
}

void DataLoader::Run() {
  while (true) {
    Batch* b = nullptr;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] {
        return stop_ || (!free_.empty() &&
                         static_cast<int>(ready_.size()) < options_.prefetch_depth);
      });
      if (stop_) return;
      b = free_.front();
      free_.pop_front();
    }
    const std::vector<int64_t> samples = sampler_->NextMicroBatch();
    Status s = Fill(*b, samples);
    b->state_after = sampler_->state();
    b->step_index = produced_++;
    b->view.staged = nullptr;
    if (s.ok() && stager_ != nullptr) s = stager_->Stage(*b);
    std::lock_guard<std::mutex> l(mu_);
    if (!s.ok()) {
      error_ = s;
      free_.push_back(b);
      cv_.notify_all();
      return;
    }
    ready_.push_back(b);
    cv_.notify_all();
  }
}

StatusOr<Batch*> DataLoader::Next() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !ready_.empty() || !error_.ok(); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  total_wait_s_ += waited;
  pending_wait_s_ += waited;
  if (ready_.empty()) return error_;
  Batch* b = ready_.front();
  ready_.pop_front();
  consumed_state_ = b->state_after;
  return b;
}

void DataLoader::Release(Batch* b) {
  {
    std::lock_guard<std::mutex> l(mu_);
    free_.push_back(b);
  }
  cv_.notify_all();
}

double DataLoader::TakeWaitSeconds() {
  std::lock_guard<std::mutex> l(mu_);
  const double w = pending_wait_s_;
  pending_wait_s_ = 0;
  return w;
}

}  // namespace hypertrain::data
