#pragma once
// DataLoader: a background thread fills up to prefetch_depth micro-batches
// ahead into reusable host buffers, so the step never waits on I/O unless the
// data source is slower than training (then Next() measures the wait).
//
// Backends hook in with:
//  - HostAllocator: where batch buffers live (CUDA: pinned, cudaHostAlloc).
//    Buffers are allocated once (prefetch_depth + 2 of them) and recycled.
//  - BatchStager: called on the prefetch thread after a batch is filled
//    (CUDA: cudaMemcpyAsync on its own H2D stream + event; store what it needs
//    in Batch::view.staged). It may fail; the error surfaces from Next().
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "runtime/data/sampler.h"
#include "runtime/data/sft/dataset.h"
#include "runtime/data/shard.h"
#include "runtime/model/backend.h"

namespace hypertrain::data {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
};

struct Batch {
  int32_t* inputs = nullptr;   // [micro_batch * seq]
  int32_t* targets = nullptr;  // [micro_batch * seq]
  int32_t* positions = nullptr;  // [micro_batch * seq], SFT (packed samples) only
  model::TokenBatch view;      // points at inputs/targets; `staged` for the backend
  SamplerState state_after;    // sampler state once this batch is consumed
  int64_t step_index = 0;      // 0-based micro-batch counter since start
};

class BatchStager {
 public:
  virtual ~BatchStager() = default;
  virtual Status Stage(Batch& batch) = 0;
};

struct LoaderOptions {
  // *.bin shards (with their manifest.json when `hypertrain prepare` made
  // them) and/or Megatron *.idx/*.bin pairs, or a Hugging Face save_to_disk
  // dataset with an `input_ids` column (its "train" split for a DatasetDict),
  // or an SFT dataset (`hypertrain prepare --sft`, runtime/data/sft): its
  // samples packed into rows (sft/dataset.h), each batch with positions.
  std::string train_dir;
  // The config key errors name for train_dir (validation: model.data.val_dir).
  std::string dir_key = "model.data.train_dir";
  // SHA-256 of the model's tokenizer.json (model.data.tokenizer); when set, a
  // manifest naming another tokenizer is refused.
  std::string tokenizer_sha256;
  bool synthetic = false;       // random tokens, no files
  int64_t vocab_size = 256;     // synthetic range; real tokens are checked < vocab
  int64_t micro_batch = 1;
  int64_t seq = 128;
  int64_t grad_accum = 1;
  int rank = 0;
  int dp_world = 1;
  int prefetch_depth = 2;       // >= 1
  SamplerState state;           // resume point (seed set from config)
  int32_t ignore_index = -100;  // SFT targets out of the loss
};

class DataLoader {
 public:
  // Opens every shard in train_dir (or none when synthetic) and starts the
  // prefetch thread. Errors name the directory/file and the problem.
  static StatusOr<std::unique_ptr<DataLoader>> Create(const LoaderOptions& options,
                                                      HostAllocator* allocator = nullptr,
                                                      BatchStager* stager = nullptr);
  ~DataLoader();

  // Next micro-batch for this rank (blocks until the prefetch thread has
  // one). The batch stays valid until Release(batch).
  StatusOr<Batch*> Next();
  // Gives the buffer back for refilling.
  void Release(Batch* batch);
  // Seconds Next() spent blocked in total, and since the last call.
  double TotalWaitSeconds() const { return total_wait_s_; }
  double TakeWaitSeconds();
  // Sampler state after the last batch returned by Next().
  SamplerState state() const { return consumed_state_; }
  int64_t num_samples() const { return num_samples_; }
  int64_t num_tokens() const { return num_tokens_; }
  // SFT: "N samples packed into R rows of T (E% of positions used, K
  // truncated, S skipped)"; empty otherwise.
  const std::string& packing_summary() const { return packing_summary_; }

 private:
  DataLoader() = default;
  void Run();
  Status Fill(Batch& b, const std::vector<int64_t>& samples);

  LoaderOptions options_;
  HostAllocator* allocator_ = nullptr;
  BatchStager* stager_ = nullptr;
  std::unique_ptr<HostAllocator> default_allocator_;
  std::vector<std::unique_ptr<TokenFile>> files_;
  std::vector<int64_t> file_starts_;  // cumulative token offsets
  int64_t num_tokens_ = 0;
  int64_t num_samples_ = 0;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<sft::Dataset> sft_;
  std::vector<std::vector<int64_t>> sft_rows_;
  std::string packing_summary_;

  std::vector<std::unique_ptr<Batch>> pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch*> free_;
  std::deque<Batch*> ready_;
  Status error_;
  bool stop_ = false;
  std::thread thread_;
  int64_t produced_ = 0;
  SamplerState consumed_state_;
  double total_wait_s_ = 0, pending_wait_s_ = 0;
};

}  // namespace hypertrain::data
