// SFT with LoRA from Hugging Face weights end to end on the CPU: JSONL
// conversations prepared with the real Llama-2 tokenizer and chat format,
// packed rows, a LoRA run through the training job, and the exported adapter
// lowering the loss of a held-out split (evaluated on packed rows with the
// base loaded from the HF directory and the adapter from its PEFT files).
#include <gtest/gtest.h>

#include <random>

#include "core/atomic_file.h"
#include "runtime/backends/cpu/backend.h"
#include "runtime/ckpt/peft_export.h"
#include "runtime/ckpt/peft_hooks.h"
#include "runtime/data/sft/dataset.h"
#include "runtime/data/sft/prepare.h"
#include "runtime/data/tokenizer/testing.h"
#include "runtime/train/trainer.h"
#include "tests/ckpt/resume_testing.h"

namespace hypertrain::ckpt {
namespace {

// "Repeat twice: w1 w2" -> "w1 w2 w1 w2" (twice = true), or the base's task
// "Say once: w1 w2" -> "w1 w2".
std::string Jsonl(int n, uint64_t seed, bool twice = true) {
  static const char* kWords[] = {"apple", "river", "stone", "cloud", "tiger", "lamp", "green", "north"};
  std::mt19937_64 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const std::string a = kWords[rng() % 8], b = kWords[rng() % 8];
    const std::string answer = twice ? a + " " + b + " " + a + " " + b : a + " " + b;
    out += "{\"messages\": [{\"role\": \"user\", \"content\": \"" +
           std::string(twice ? "Repeat twice: " : "Say once: ") + a + " " + b +
           "\"}, {\"role\": \"assistant\", \"content\": \"" + answer + "\"}]}\n";
  }
  return out;
}

std::vector<std::string> Sets(const std::string& exp, const std::string& tok) {
  return {"trainer.backend=cpu", "trainer.log_every_n_steps=100", "model.shape=tiny",
          "model.vocab_size=32000", "model.hidden_size=64", "model.num_hidden_layers=2",
          "model.num_attention_heads=4", "model.num_key_value_heads=2",
          "model.intermediate_size=128", "model.max_context_width=64", "model.train_batch_size=4",
          "model.data.tokenizer=" + tok, "exp_manager.exp_dir=" + exp};
}

TEST(PeftSftTest, LoraFromHfWeightsLowersHeldOutLoss) {
  const std::string tok = tokenizer::testing::RealTokenizerDir("llama2");
  if (tok.empty()) {
    if (std::getenv("CI") != nullptr) FAIL() << "llama2 tokenizer missing (tools/setup.sh)";
    GTEST_SKIP() << "llama2 tokenizer missing: run tools/setup.sh";
  }
  const std::string root = testing::FreshTempDir("peft_sft");
  ASSERT_TRUE(WriteFileAtomically(root + "/train.jsonl", Jsonl(96, 1)).ok());
  ASSERT_TRUE(WriteFileAtomically(root + "/val.jsonl", Jsonl(24, 2)).ok());
  ASSERT_TRUE(WriteFileAtomically(root + "/pre.jsonl", Jsonl(96, 3, false)).ok());
  for (const char* split : {"train", "val", "pre"}) {
    data::sft::PrepareOptions o;
    o.inputs = {root + "/" + split + ".jsonl"};
    o.out_dir = root + "/" + split;
    o.tokenizer_dir = tok;
    o.format = data::sft::ChatFormat::kLlama2;
    auto m = data::sft::Prepare(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
  }
  // The base: a model fully trained on another task with the same words, as
  // HF weights.
  auto base_sets = Sets(root + "/base", tok);
  for (const std::string& s : std::vector<std::string>{"trainer.max_steps=40", "model.optim.lr=1e-2",
                               "model.data.train_dir=" + root + "/pre",
                               "exp_manager.checkpoint.export_hf_dir=" + root + "/hf",
                               "exp_manager.checkpoint.export_hf_dtype=fp32"}) {
    base_sets.push_back(s);
  }
  auto base_cfg = config::ParseTrainConfig("", base_sets);
  ASSERT_TRUE(base_cfg.ok()) << base_cfg.status().ToString();
  ASSERT_TRUE(testing::RunJob(*base_cfg).ok());

  auto sets = Sets(root + "/lora", tok);
  for (const std::string& s :
       std::vector<std::string>{"trainer.max_steps=50", "model.data.train_dir=" + root + "/train", "model.do_finetune=true",
        "model.hf_model_name_or_path=" + root + "/hf", "model.peft.peft_type=lora",
        "model.peft.rank=8", "model.peft.alpha=16", "model.peft.dropout=0.05",
        "model.optim.lr=1e-2", "model.activation_checkpointing=selective"}) {
    sets.push_back(s);
  }
  auto c = config::ParseTrainConfig("", sets);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto run = testing::RunJob(*c);
  ASSERT_TRUE(run.ok()) << run.status().ToString();

  // Held-out loss over every packed val row: base + fresh adapter vs base +
  // the exported adapter.
  auto val = data::sft::Dataset::Open(root + "/val");
  ASSERT_TRUE(val.ok());
  const data::sft::PackPlan plan = data::sft::PackBestFit(**val, 64);
  model::BackendOptions o;
  o.micro_batch_size = 1;
  o.seq_len = 64;
  o.peft = c->finetune.peft;
  auto eval = [&](const std::string& adapter_dir) {
    auto b = cpu::CpuBackend::Create(c->model, o);
    EXPECT_TRUE(b.ok());
    EXPECT_TRUE(LoadFrozenBase(*c, **b).ok());
    if (!adapter_dir.empty()) {
      auto a = LoadAdapter(adapter_dir);
      EXPECT_TRUE(a.ok()) << a.status().ToString();
      for (const model::UnitLayout& u : (*b)->layout().units()) {
        std::vector<float> v(u.padded_numel, 0.0f);
        for (const model::TensorSlot& t : u.tensors) {
          const auto& x = a->tensors.at(t.name).values;
          std::copy(x.begin(), x.end(), v.begin() + t.offset);
        }
        EXPECT_TRUE((*b)->WriteState(u.index, model::StateKind::kMasterParams, v.data()).ok());
      }
    }
    double sum = 0;
    int64_t count = 0;
    std::vector<int32_t> in(64), tg(64), pos(64);
    model::NoOpUnitHooks hooks;
    for (const auto& row : plan.rows) {
      data::sft::FillRow(**val, row, 64, -100, in.data(), tg.data(), pos.data());
      model::TokenBatch batch{in.data(), tg.data(), 1, 64};
      batch.positions = pos.data();
      int64_t n = 0;
      for (int32_t t : tg) n += t != -100;
      sum += *(*b)->Loss(batch, hooks) * static_cast<double>(n);
      count += n;
    }
    return sum / static_cast<double>(count);
  };
  const double before = eval(""), after = eval(c->finetune.adapter_dir);
  std::fprintf(stderr, "held-out loss: base %.4f, with the adapter %.4f\n", before, after);
  EXPECT_LT(after, before - 0.2);  // 1.744 -> 1.439 when written
}

}  // namespace
}  // namespace hypertrain::ckpt
