#include "runtime/launch/nccl_net.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace hypertrain::launch {
namespace {

namespace fs = std::filesystem;

struct Env {
  std::map<std::string, std::string> vars;
  GetEnv get() const {
    return [this](const char* k) -> const char* {
      auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  fs::path p = fs::path(t ? t : "/tmp") / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// The fake plugin built beside this test (a cc_binary with linkshared).
std::string FakePlugin() {
  for (const char* p : {"runtime/launch/libnccl-net-fake.so"}) {
    if (fs::exists(p)) return fs::absolute(p).string();
  }
  return "";
}

TEST(NcclNet, FindsThePluginNamedByNcclNetPluginAndItsEntryPoints) {
  const std::string lib = FakePlugin();
  ASSERT_FALSE(lib.empty());
  Env env{{{"NCCL_NET_PLUGIN", lib}}};
  NcclNetPreflight p = CheckNcclNet(env.get(), TempDir("nosys"));
  EXPECT_EQ(p.tried, (std::vector<std::string>{"libnccl-net-" + lib + ".so", lib}));
  ASSERT_TRUE(p.plugin.has_value());
  EXPECT_EQ(fs::canonical(p.plugin->path), fs::canonical(lib));
  EXPECT_EQ(p.plugin->entry_points, (std::vector<std::string>{"ncclNetPlugin_v9", "ncclNetPlugin_v8"}));
  PreflightMessage m = Describe(p);
  EXPECT_FALSE(m.warn);
  EXPECT_NE(m.text.find("NCCL net plugin: "), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("ncclNetPlugin_v9"), std::string::npos) << m.text;
}

TEST(NcclNet, AnyLibraryWithoutAnEntryPointIsNoPlugin) {
  Env env{{{"NCCL_NET_PLUGIN", "libz.so.1"}}};  // loads, but is not a plugin
  EXPECT_FALSE(CheckNcclNet(env.get(), TempDir("nosys2")).plugin.has_value());
}

TEST(NcclNet, DetectsEfaBySysfsDriverNameOrFiProvider) {
  const std::string sys = TempDir("sys");
  Env none;
  EXPECT_EQ(DetectEfa(sys, none.get()), "");
  // An InfiniBand device of another driver is not EFA.
  fs::create_directories(sys + "/class/infiniband/mlx5_0/device");
  fs::create_directories(sys + "/bus/pci/drivers/mlx5_core");
  fs::create_directory_symlink(sys + "/bus/pci/drivers/mlx5_core", sys + "/class/infiniband/mlx5_0/device/driver");
  EXPECT_EQ(DetectEfa(sys, none.get()), "");
  // EFA devices are named like rdmap16s27; their driver is efa.
  fs::create_directories(sys + "/class/infiniband/rdmap16s27/device");
  fs::create_directories(sys + "/bus/pci/drivers/efa");
  fs::create_directory_symlink(sys + "/bus/pci/drivers/efa", sys + "/class/infiniband/rdmap16s27/device/driver");
  EXPECT_NE(DetectEfa(sys, none.get()).find("EFA device rdmap16s27"), std::string::npos);
  Env fi{{{"FI_PROVIDER", "efa"}}};
  EXPECT_EQ(DetectEfa(TempDir("empty"), fi.get()), "FI_PROVIDER=efa");
}

TEST(NcclNet, WarnsLoudlyOnAnEfaNodeWithoutAPlugin) {
  Env env{{{"FI_PROVIDER", "efa"}, {"NCCL_NET_PLUGIN", "definitely-missing"}}};
  NcclNetPreflight p = CheckNcclNet(env.get(), TempDir("nosys3"));
  EXPECT_FALSE(p.plugin.has_value());
  PreflightMessage m = Describe(p);
  EXPECT_TRUE(m.warn);
  EXPECT_NE(m.text.find("EFA NODE WITHOUT AN NCCL NET PLUGIN"), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("libnccl-net-definitely-missing.so"), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("TCP sockets"), std::string::npos) << m.text;
  // The same without EFA is only information.
  Env plain{{{"NCCL_NET_PLUGIN", "definitely-missing"}}};
  PreflightMessage q = Describe(CheckNcclNet(plain.get(), TempDir("nosys4")));
  EXPECT_FALSE(q.warn);
  EXPECT_NE(q.text.find("NCCL net plugin: none"), std::string::npos) << q.text;
  // Unset: NCCL's default name.
  Env unset;
  EXPECT_EQ(CheckNcclNet(unset.get(), TempDir("nosys5")).tried, (std::vector<std::string>{"libnccl-net.so"}));
  Env off{{{"NCCL_NET_PLUGIN", "none"}}};
  EXPECT_TRUE(CheckNcclNet(off.get(), TempDir("nosys6")).tried.empty());
}

}  // namespace
}  // namespace hypertrain::launch
