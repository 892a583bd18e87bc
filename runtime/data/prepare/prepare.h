#pragma once
// `hypertrain prepare`: inputs (inputs.h) -> token shards (shard.h) plus
// manifest.json (manifest.h), with a Hugging Face tokenizer or bytes.
//
//   reader thread ──batches of documents──▶ N tokenizer threads ──▶ writer
//   (in input order)                       (all cores)              (in order)
//
// Each document becomes [BOS] ids EOS (BOS when the tokenizer adds one, see
// Tokenizer::add_bos; bytes: the document's bytes then 0). Pre-tokenized
// Arrow rows are copied as they are. Memory stays bounded: a few batches in
// flight and one shard being filled. Output goes to a temporary directory
// beside OUT, renamed into place at the end (an existing OUT is replaced only
// with --overwrite, and only once the new data is complete); on failure
// nothing is left behind.
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/data/manifest.h"
#include "runtime/data/prepare/inputs.h"

namespace hypertrain::data::prepare {

enum class BosPolicy { kAuto, kAlways, kNever };

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string tokenizer_dir;  // empty: bytes (vocab 256)
  InputOptions input;
  int64_t tokens_per_shard = int64_t{1} << 24;
  int workers = 0;            // 0: one per core
  bool overwrite = false;
  BosPolicy bos = BosPolicy::kAuto;
  bool progress = true;       // progress line on stderr
};

StatusOr<DataManifest> Prepare(const PrepareOptions& options);

}  // namespace hypertrain::data::prepare
