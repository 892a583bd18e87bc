#pragma once
// Supervised fine-tuning samples: a JSONL line as text segments in the
// model's chat format, then token ids with a loss mask.
//
// A line is either {"messages": [{"role": "system"|"user"|"assistant",
// "content": "..."}, ...]} or {"prompt": "...", "completion": "..."} (a user
// turn and an assistant turn). Formats, exactly as the chat_template of the
// model's tokenizer_config.json renders them:
//  - llama3 (the template shipped with Meta-Llama-3 tokenizers): per message
//    "<|start_header_id|>" role "<|end_header_id|>\n\n" trim(content)
//    "<|eot_id|>", BOS before the first. (That template always appends an
//    assistant header for generation; a training sample ends at the last
//    <|eot_id|>. RenderForGeneration gives the template's exact text.)
//  - llama2 (Llama-2-chat): an optional system message folded into the first
//    user turn as "<<SYS>>\n" system "\n<</SYS>>\n\n"; user turns
//    BOS "[INST] " strip(content) " [/INST]", assistant turns
//    " " strip(content) " " EOS; roles must alternate user/assistant.
//  - none: BOS prompt completion EOS for prompt/completion lines (no template).
// trim/strip remove Python's whitespace (str.strip()). The loss applies to
// the assistant turns' text and their end-of-turn token (<|eot_id|> / EOS),
// nothing else.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "runtime/data/tokenizer/tokenizer.h"

namespace hypertrain::data::sft {

enum class ChatFormat { kLlama3, kLlama2, kNone };
const char* ChatFormatName(ChatFormat f);
StatusOr<ChatFormat> ParseChatFormat(const std::string& s);  // llama3, llama2, none

struct Message {
  std::string role;
  std::string content;
};

struct Segment {
  std::string text;     // may contain special-token text (<|eot_id|>, <s>, ...)
  bool target = false;  // its tokens count in the loss
};

// The messages of one JSONL object (messages, or prompt/completion).
// InvalidArgument naming the problem (no such field, a role that is not
// system/user/assistant, content not a string, no assistant turn).
StatusOr<std::vector<Message>> MessagesFromJson(const nlohmann::json& line);

// Training text of a conversation. bos/eos are the tokenizer's token strings.
StatusOr<std::vector<Segment>> Render(ChatFormat f, const std::vector<Message>& messages,
                                      const std::string& bos, const std::string& eos);
// The chat template's text with add_generation_prompt (llama3: + the
// assistant header; llama2: as Render). For parity checks.
StatusOr<std::string> RenderForGeneration(ChatFormat f, const std::vector<Message>& messages,
                                          const std::string& bos, const std::string& eos);

// Python's str.strip() whitespace removed from both ends.
std::string PyStrip(const std::string& s);

struct Sample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> target;  // per id: 1 = in the loss
};

// Tokenizes the concatenated segments in one pass (special-token text parsed,
// no template BOS/EOS added: the format carries its own) and marks the ids of
// target segments. A token that straddles a segment boundary (a BPE merge
// across it) belongs to the later segment.
StatusOr<Sample> Tokenize(const tokenizer::Tokenizer& tok, const std::vector<Segment>& segments);

}  // namespace hypertrain::data::sft
