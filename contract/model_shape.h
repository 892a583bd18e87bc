#pragma once
// A Llama-3 decoder's shape, declared once for both sides: the operator's
// estimate and trainer-config reader (contract/estimate.h,
// contract/trainer_config.h) and the trainer's model (runtime/model/config.h,
// whose ModelConfig adds the runtime-only fields on top of this struct).
// Field names follow Hugging Face's LlamaConfig (config.json). Standard
// library only.
#include <cstdint>

namespace hypertrain::contract {

struct ModelShape {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t intermediate_size = 0;
  bool tie_word_embeddings = true;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t q_dim() const { return num_attention_heads * head_dim(); }
  int64_t kv_dim() const { return num_key_value_heads * head_dim(); }
};

}  // namespace hypertrain::contract
