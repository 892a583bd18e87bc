// LoRA adapter forward/backward and its dropout on the device vs the CPU
// reference (cpu::LoraForward/LoraBackward/DropoutForward in fp64) on random
// inputs, with and without dropout; the device mask is the CPU's bit for bit.
#include "runtime/kernels/cuda/lora.h"

#include <gtest/gtest.h>

#include "runtime/backends/cpu/ops.h"
#include "runtime/kernels/cuda/lora_dropout.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomVector;
using testing::ToDouble;

model::DropoutMask Mask(double p, uint64_t pass) {
  model::PeftOptions o;
  o.type = model::PeftType::kLora;
  o.dropout = p;
  return model::MakeDropoutMask(o, /*seed=*/1234, pass, /*layer=*/3, /*target=*/model::kVProj);
}

TEST(LoraDropoutTest, DeviceMaskIsTheCpuMaskBitForBit) {
  HT_SKIP_WITHOUT_GPU();
  const int64_t n = 100003;  // odd, several blocks
  std::mt19937 rng(5);
  std::vector<double> x;
  auto hx = RandomVector<float>(n, rng, 1.0f, &x);
  DeviceBuffer<float> dx(n), du(n), dgrad(n), dgo(n);
  HT_CUDA_ASSERT(dx.Upload(hx));
  const model::DropoutMask m = Mask(0.3, 7);
  ASSERT_TRUE(m.active());
  HT_CUDA_ASSERT(LoraDropoutForward<float>(du.get(), dx.get(), n, m.key, m.threshold, m.scale,
                                           nullptr));
  std::vector<float> ref(n);
  cpu::DropoutForward<float>(ref.data(), hx.data(), n, m);
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<float> got = du.Download();
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], ref[i]) << "element " << i;
    dropped += ref[i] == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.3, 0.01);
  // Backward: dx += keep * scale * du, starting from random dx.
  std::vector<double> g0, go;
  auto hg0 = RandomVector<float>(n, rng, 1.0f, &g0);
  auto hgo = RandomVector<float>(n, rng, 1.0f, &go);
  HT_CUDA_ASSERT(dgrad.Upload(hg0));
  HT_CUDA_ASSERT(dgo.Upload(hgo));
  HT_CUDA_ASSERT(LoraDropoutBackwardAccumulate<float>(dgrad.get(), dgo.get(), n, m.key,
                                                      m.threshold, m.scale, nullptr));
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<float> g = dgrad.Download();
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = model::DropoutKeep(m.key, i, m.threshold);
    ASSERT_EQ(g[i], keep ? hg0[i] + hgo[i] * m.scale : hg0[i]) << "element " << i;
  }
}

template <typename T>
class LoraTest : public ::testing::Test {};
using Types = ::testing::Types<float, __nv_bfloat16>;
TYPED_TEST_SUITE(LoraTest, Types);

TYPED_TEST(LoraTest, ForwardAndBackwardMatchTheCpuReference) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  auto gemm = Gemm::Create(/*allow_tf32=*/false);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  // Llama-like aspect ratios, small: q (IF = OF), gate (OF > IF), down (IF > OF).
  struct Case { int n, in, out, rank; double p; };
  for (const Case c : {Case{96, 256, 256, 16, 0.0}, Case{96, 256, 688, 8, 0.1},
                       Case{80, 688, 256, 16, 0.25}}) {
    SCOPED_TRACE("N=" + std::to_string(c.n) + " IF=" + std::to_string(c.in) + " OF=" +
                 std::to_string(c.out) + " r=" + std::to_string(c.rank) + " p=" +
                 std::to_string(c.p));
    const double scaling = 32.0 / c.rank;
    const model::DropoutMask mask = Mask(c.p, 11);
    std::mt19937 rng(17 + c.rank);
    std::vector<double> x, a, b, out0, dout, dx0, da0, db0;
    auto hx = RandomVector<T>(size_t(c.n) * c.in, rng, 1.0f, &x);
    auto ha = RandomVector<T>(size_t(c.rank) * c.in, rng, 0.05f, &a);
    auto hb = RandomVector<T>(size_t(c.out) * c.rank, rng, 0.05f, &b);  // B != 0 (trained)
    auto hout = RandomVector<T>(size_t(c.n) * c.out, rng, 1.0f, &out0);
    auto hdout = RandomVector<T>(size_t(c.n) * c.out, rng, 1.0f, &dout);
    auto hdx = RandomVector<T>(size_t(c.n) * c.in, rng, 1.0f, &dx0);
    auto hda = RandomVector<float>(size_t(c.rank) * c.in, rng, 1.0f, &da0);
    auto hdb = RandomVector<float>(size_t(c.out) * c.rank, rng, 1.0f, &db0);

    DeviceBuffer<T> gx(x.size()), ga(a.size()), gb(b.size()), gout(out0.size()),
        gt(size_t(c.n) * c.rank), gu(x.size()), gdout(dout.size()), gdx(x.size()),
        gdt(size_t(c.n) * c.rank);
    DeviceBuffer<float> gda(a.size()), gdb(b.size());
    HT_CUDA_ASSERT(gx.Upload(hx));
    HT_CUDA_ASSERT(ga.Upload(ha));
    HT_CUDA_ASSERT(gb.Upload(hb));
    HT_CUDA_ASSERT(gout.Upload(hout));
    HT_CUDA_ASSERT(gdout.Upload(hdout));
    HT_CUDA_ASSERT(gdx.Upload(hdx));
    HT_CUDA_ASSERT(gda.Upload(hda));
    HT_CUDA_ASSERT(gdb.Upload(hdb));
    const LoraShape s{c.n, c.in, c.out, c.rank, static_cast<float>(scaling)};
    Status st = LoraForward<T>(**gemm, s, gout.get(), gt.get(), gu.get(), gx.get(), ga.get(),
                               gb.get(), mask, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = LoraBackward<T>(**gemm, s, gdx.get(), gda.get(), gdb.get(), gdt.get(), gu.get(),
                         gdout.get(), gx.get(), gt.get(), ga.get(), gb.get(), mask, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    HT_CUDA_ASSERT(cudaDeviceSynchronize());

    // fp64 reference (the accumulated outputs start from the same values).
    std::vector<double> out = out0, t(size_t(c.n) * c.rank), u(x.size()), dx = dx0, da = da0,
                        db = db0, dt(t.size());
    cpu::LoraForward<double>(out.data(), t.data(), u.data(), x.data(), a.data(), b.data(), c.n,
                             c.in, c.out, c.rank, scaling, mask);
    cpu::LoraBackward<double>(dx.data(), da.data(), db.data(), dt.data(), u.data(), dout.data(),
                              x.data(), t.data(), a.data(), b.data(), c.n, c.in, c.out, c.rank,
                              scaling, mask);
    // Compare the adapter's contributions (the accumulated bases cancel out).
    auto minus = [](std::vector<double> v, const std::vector<double>& base) {
      for (size_t i = 0; i < v.size(); ++i) v[i] -= base[i];
      return v;
    };
    const double tol = 2 * testing::RelTol<T>();
    ExpectClose(ToDouble(gt.Download()), t, tol, "t");
    ExpectClose(minus(ToDouble(gout.Download()), out0), minus(out, out0), 4 * tol, "out delta");
    ExpectClose(minus(ToDouble(gdb.Download()), db0), minus(db, db0), tol, "dB delta");
    ExpectClose(minus(ToDouble(gda.Download()), da0), minus(da, da0), tol, "dA delta");
    ExpectClose(minus(ToDouble(gdx.Download()), dx0), minus(dx, dx0), 4 * tol, "dx delta");
    // Without dx: the adapter gradients alone, same values.
    HT_CUDA_ASSERT(gda.Upload(hda));
    st = LoraBackward<T>(**gemm, s, nullptr, gda.get(), gdb.get(), gdt.get(), gu.get(),
                         gdout.get(), gx.get(), gt.get(), ga.get(), gb.get(), mask, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    ExpectClose(minus(ToDouble(gda.Download()), da0), minus(da, da0), tol, "dA delta (no dx)");
  }
}

TEST(LoraShapeTest, BadShapeIsAnError) {
  HT_SKIP_WITHOUT_GPU();
  auto gemm = Gemm::Create(false);
  ASSERT_TRUE(gemm.ok());
  const LoraShape s{0, 16, 16, 4, 1.0f};
  Status st = LoraForward<float>(**gemm, s, nullptr, nullptr, nullptr, nullptr, nullptr,
                                 nullptr, {}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
