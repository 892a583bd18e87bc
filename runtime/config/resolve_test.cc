#include "runtime/config/resolve.h"

#include <gtest/gtest.h>

#include <map>

#include "runtime/config/config.h"

namespace hypertrain::config {
namespace {

StatusOr<YAML::Node> Resolve(const std::string& text, const EnvLookup& env = nullptr) {
  YAML::Node root = YAML::Load(text);
  HT_RETURN_IF_ERROR(ResolveInterpolations(root, env));
  return root;
}

TEST(ResolveTest, AbsoluteRelativeAndTheLauncherRoot) {
  auto r = Resolve(R"(
base_results_dir: /results
run:
  name: llama
  results_dir: ${base_results_dir}/${.name}
trainer:
  max_steps: 50
  precision: bf16
model:
  max_context_width: 8192
  max_position_embeddings: ${.max_context_width}
  lr_decay_iters: ${recipes.trainer.max_steps}
  precision: ${recipes.trainer.precision}
  nested:
    up: ${..max_context_width}
exp_manager:
  exp_dir: ${run.results_dir}
  checkpoint_dir: ${recipes.exp_manager.exp_dir}/checkpoints/
  literal: \${not.a.ref}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const YAML::Node& n = *r;
  EXPECT_EQ(n["run"]["results_dir"].as<std::string>(), "/results/llama");
  EXPECT_EQ(n["model"]["max_position_embeddings"].as<int>(), 8192);  // keeps its type
  EXPECT_EQ(n["model"]["lr_decay_iters"].as<int>(), 50);
  EXPECT_EQ(n["model"]["precision"].as<std::string>(), "bf16");
  EXPECT_EQ(n["model"]["nested"]["up"].as<int>(), 8192);
  EXPECT_EQ(n["exp_manager"]["checkpoint_dir"].as<std::string>(), "/results/llama/checkpoints/");
  EXPECT_EQ(n["exp_manager"]["literal"].as<std::string>(), "${not.a.ref}");
}

TEST(ResolveTest, AWholeValueReferenceCarriesMapsAndNull) {
  auto r = Resolve("a:\n  x: 1\n  y: ${b}\nb: null\nc: ${a}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["c"]["x"].as<int>(), 1);
  EXPECT_TRUE((*r)["c"]["y"].IsNull());
}

TEST(ResolveTest, EnvironmentWithAndWithoutDefault) {
  const EnvLookup env = EnvFromMap({{"DATA", "/fsx/data"}});
  auto r = Resolve("a: ${oc.env:DATA}\nb: ${oc.env:MISSING,/tmp/x}\nc: ${oc.env:MISSING,null}\n"
                   "d: pre-${oc.env:DATA}-post\ne: ${oc.env:MISSING,${a}}\n",
                   env);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["a"].as<std::string>(), "/fsx/data");
  EXPECT_EQ((*r)["b"].as<std::string>(), "/tmp/x");
  EXPECT_TRUE((*r)["c"].IsNull());
  EXPECT_EQ((*r)["d"].as<std::string>(), "pre-/fsx/data-post");
  EXPECT_EQ((*r)["e"].as<std::string>(), "/fsx/data");
  auto missing = Resolve("x:\n  y: ${oc.env:NOPE}\n", env);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "x.y: ${oc.env:NOPE}: the environment variable NOPE is not set (and no default is given: "
            "${oc.env:NOPE,default})");
}

TEST(ResolveTest, ErrorsNameTheKey) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"run:\n  results_dir: ${base_results_dir}/x\n",
       "run.results_dir: ${base_results_dir}: there is no key 'base_results_dir' in the config (give it with "
       "--set base_results_dir=...)"},
      {"a:\n  b: ${a.nope}\n", "a.b: ${a.nope}: there is no key 'a.nope' in the config"},
      {"a: ${b}\nb: ${c}\nc: ${a}\n", "a: interpolation cycle: a -> b -> c -> a"},
      {"a: ${a}\n", "a: interpolation cycle: a -> a"},
      {"a: x/${b}\nb: null\n", "a: 'x/${b}': ${b} is null and cannot be part of a string"},
      {"a: x/${b}\nb: {c: 1}\n", "a: 'x/${b}': ${b} is a map, not a scalar"},
      {"a: ${oc.select:b,1}\n", "a: ${oc.select:b,1}: resolver 'oc.select' is not supported (supported: oc.env)"},
      {"a: ${b\n", "a: '${b': unterminated '${'"},
      {"a: ${...x}\n", "a: ${...x} goes above the top of the config"},
  };
  for (const Case& c : cases) {
    auto r = Resolve(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message) << c.text;
  }
}

// Through ParseTrainConfig: a recipe's exp_dir: null becomes the launcher's
// run.results_dir, and --set values take part in interpolation.
TEST(ResolveTest, RecipeExpDirDefaultsToTheResultsDir) {
  const char* recipe = R"(
run:
  name: llama3.2-1b
  results_dir: ${base_results_dir}/${.name}
exp_manager:
  exp_dir: null
  checkpoint_dir: ${recipes.exp_manager.exp_dir}/checkpoints/
model:
  data:
    use_synthetic_data: True
)";
  auto c = ParseTrainConfig(recipe, {"base_results_dir=/r"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->exp_dir, "/r/llama3.2-1b");
  EXPECT_EQ(c->checkpoint_dir, "/r/llama3.2-1b/checkpoints");
  auto no_base = ParseTrainConfig(recipe, {});
  ASSERT_FALSE(no_base.ok());
  EXPECT_NE(no_base.status().message().find("--set base_results_dir="), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::config
