#pragma once
// A prepared SFT dataset (`hypertrain prepare --sft`) and how the trainer
// packs it.
//
// Directory: manifest.json ({"format": "hypertrain-sft", "version": 1,
// tokenizer {path, sha256, vocab_size}, chat_format, samples, tokens,
// target_tokens, skipped, inputs}) and samples.bin (little-endian,
// memory-mapped):
//   0   8  magic "HTSFTDAT"
//   8   4  uint32 version = 1
//   12  4  uint32 vocab size the ids were made for
//   16  8  uint64 number of samples n
//   24  8  uint64 number of tokens m
//   32  32 zero
//   64  8(n+1)  uint64 token offset of each sample (offset[0] = 0, offset[n] = m)
//   ..  4m      uint32 per token: id | (1 << 31) when the token is in the loss
// The file size must be exactly 64 + 8(n+1) + 4m.
//
// Packing (padding-free): a sample of L tokens feeds L-1 positions (inputs
// ids[0..L-2], targets ids[1..L-1], a target ignored unless its token is in
// the loss). Samples longer than seq+1 tokens keep their first seq+1 (counted
// as truncated). Rows of seq positions are filled best-fit-decreasing (each
// sample, longest first, into the fullest row it still fits, else a new row),
// which leaves only row tails shorter than every remaining sample unused; the
// tail is one more "sample" of ignored targets. The plan is a function of the
// sample lengths and seq only; the sampler shuffles the rows per epoch
// (runtime/data/sampler.h), so resume stays exact.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "runtime/data/sft/chat.h"

namespace hypertrain::data::sft {

inline constexpr char kSftFormat[] = "hypertrain-sft";
inline constexpr char kSamplesFile[] = "samples.bin";

// Writes samples.bin and manifest.json into `dir` (created; files atomic).
Status WriteDataset(const std::string& dir, const std::vector<Sample>& samples, uint32_t vocab_size,
                    nlohmann::json manifest);

// True when dir holds an SFT dataset (a manifest.json of format hypertrain-sft).
bool IsSftDataset(const std::string& dir);

class Dataset {
 public:
  static StatusOr<std::unique_ptr<Dataset>> Open(const std::string& dir);
  ~Dataset();
  int64_t num_samples() const { return n_; }
  int64_t num_tokens() const { return m_; }
  uint32_t vocab_size() const { return vocab_; }
  int64_t length(int64_t i) const { return static_cast<int64_t>(offsets_[i + 1] - offsets_[i]); }
  const uint32_t* tokens(int64_t i) const { return tokens_ + offsets_[i]; }
  const nlohmann::json& manifest() const { return manifest_; }

 private:
  Dataset() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  int64_t n_ = 0, m_ = 0;
  uint32_t vocab_ = 0;
  const uint64_t* offsets_ = nullptr;
  const uint32_t* tokens_ = nullptr;
  nlohmann::json manifest_;
};

inline constexpr uint32_t kTargetBit = 0x80000000u;

struct PackPlan {
  std::vector<std::vector<int64_t>> rows;  // sample indices per row, in row order
  int64_t truncated = 0;                   // samples cut to seq+1 tokens
  int64_t skipped = 0;                     // samples of fewer than 2 tokens
  int64_t used_positions = 0;              // positions holding sample tokens
  double efficiency(int64_t seq) const {
    return rows.empty() ? 0.0 : static_cast<double>(used_positions) / (rows.size() * seq);
  }
};
PackPlan PackBestFit(const Dataset& d, int64_t seq);

// Fills one packed row: inputs/targets/positions [seq]. ignore_index marks
// targets out of the loss; tail positions restart at 0 with input id 0.
void FillRow(const Dataset& d, const std::vector<int64_t>& row, int64_t seq, int32_t ignore_index,
             int32_t* inputs, int32_t* targets, int32_t* positions);

}  // namespace hypertrain::data::sft
