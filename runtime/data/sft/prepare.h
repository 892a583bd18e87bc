#pragma once
// `hypertrain prepare --sft`: JSONL conversations (chat.h) into an SFT
// dataset directory (dataset.h). Each line is rendered in the chat format,
// tokenized with the real tokenizer and stored with its loss mask. Output goes
// to a temporary directory beside `out` and is renamed into place once
// complete; a non-empty `out` is refused unless overwrite. Errors name the
// file and line (InvalidArgument for bad content, NotFound for a missing
// file); nothing is left behind on error.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "runtime/data/sft/chat.h"

namespace hypertrain::data::sft {

struct PrepareOptions {
  std::vector<std::string> inputs;  // *.jsonl
  std::string out_dir;
  std::string tokenizer_dir;
  ChatFormat format = ChatFormat::kLlama3;
  bool overwrite = false;
};

// Returns the manifest written.
StatusOr<nlohmann::json> Prepare(const PrepareOptions& o);

}  // namespace hypertrain::data::sft
