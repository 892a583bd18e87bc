// cuBLASLt GEMM wrapper vs the CPU reference (fp64) in the three layouts the
// model uses, for bf16/fp16/fp32 (plain and TF32) inputs.
#include "runtime/kernels/cuda/gemm.h"

#include <gtest/gtest.h>

#include <cstring>

#include "runtime/backends/cpu/ops.h"
#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomVector;
using testing::ToDouble;

template <typename T>
class GemmTest : public ::testing::Test {};
using Types = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(GemmTest, Types);

// Relative tolerance of a K-long fp32-accumulated dot product of T inputs
// whose output is rounded to `out` precision.
template <typename T>
double GemmTol(bool tf32, bool fp32_out) {
  if (std::is_same_v<T, float>) return tf32 ? 2e-3 : 1e-5;
  return fp32_out ? 1e-4 : testing::RelTol<T>();
}

TYPED_TEST(GemmTest, ForwardAndBothBackwardLayouts) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  constexpr DType kT = DTypeOf<T>::value;
  for (bool tf32 : {false, true}) {
    if (tf32 && kT != DType::kF32) continue;
    auto gemm_or = Gemm::Create(tf32);
    ASSERT_TRUE(gemm_or.ok()) << gemm_or.status().ToString();
    Gemm& gemm = **gemm_or;
    // Odd sizes: no tile multiple; tokens N, in I, out O.
    const int N = 200, I = 136, O = 72;
    std::mt19937 rng(7 + tf32);
    std::vector<double> x, w, dy, dx0, dw0;
    auto hx = RandomVector<T>(size_t(N) * I, rng, 1.0f, &x);
    auto hw = RandomVector<T>(size_t(O) * I, rng, 0.1f, &w);
    auto hdy = RandomVector<T>(size_t(N) * O, rng, 1.0f, &dy);
    auto hdx0 = RandomVector<T>(size_t(N) * I, rng, 1.0f, &dx0);
    auto hdw0 = RandomVector<float>(size_t(O) * I, rng, 1.0f, &dw0);
    DeviceBuffer<T> dx_(x.size()), dw_(w.size()), ddy(dy.size()), ddx(dx0.size()), dy_out(dy.size());
    DeviceBuffer<float> ddw(dw0.size());
    HT_CUDA_ASSERT(dx_.Upload(hx));
    HT_CUDA_ASSERT(dw_.Upload(hw));
    HT_CUDA_ASSERT(ddy.Upload(hdy));
    HT_CUDA_ASSERT(ddx.Upload(hdx0));
    HT_CUDA_ASSERT(ddw.Upload(hdw0));

    // Y = X W^T
    auto st = gemm.Matmul({N, O, I, false, true}, dx_.get(), dw_.get(), kT, dy_out.get(), kT, 1.0f,
                          0.0f, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // dX += dY W   (beta 1 accumulate in T)
    st = gemm.Matmul({N, I, O, false, false}, ddy.get(), dw_.get(), kT, ddx.get(), kT, 1.0f, 1.0f,
                     nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // dW += dY^T X  (fp32 accumulate)
    st = gemm.Matmul({O, I, N, true, false}, ddy.get(), dx_.get(), kT, ddw.get(), DType::kF32,
                     1.0f, 1.0f, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    HT_CUDA_ASSERT(cudaDeviceSynchronize());

    std::vector<double> y(size_t(N) * O), rdx = dx0, rdw = dw0;
    cpu::Matmul<double>(y.data(), x.data(), w.data(), N, I, O);
    cpu::MatmulBackward<double>(rdx.data(), rdw.data(), dy.data(), x.data(), w.data(), N, I, O);
    const std::string tag = std::string(DTypeName(kT)) + (tf32 ? "+tf32" : "");
    ExpectClose(ToDouble(dy_out.Download()), y, GemmTol<T>(tf32, kT == DType::kF32), tag + " Y");
    ExpectClose(ToDouble(ddx.Download()), rdx, GemmTol<T>(tf32, kT == DType::kF32), tag + " dX");
    ExpectClose(ToDouble(ddw.Download()), rdw, GemmTol<T>(tf32, true), tag + " dW");
    EXPECT_EQ(gemm.cached_plans(), 3u);
  }
}

// Output written into a column slice of a wider matrix (fused QKV buffer).
TYPED_TEST(GemmTest, LeadingDimensionsSelectSlices) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  constexpr DType kT = DTypeOf<T>::value;
  auto gemm_or = Gemm::Create(false);
  ASSERT_TRUE(gemm_or.ok()) << gemm_or.status().ToString();
  const int N = 64, I = 48, O = 40, W = 128, col0 = 24;
  std::mt19937 rng(11);
  std::vector<double> x, w, out0;
  auto hx = RandomVector<T>(size_t(N) * I, rng, 1.0f, &x);
  auto hw = RandomVector<T>(size_t(O) * I, rng, 0.1f, &w);
  auto hout = RandomVector<T>(size_t(N) * W, rng, 1.0f, &out0);
  DeviceBuffer<T> dx(x.size()), dw(w.size()), dout(out0.size());
  HT_CUDA_ASSERT(dx.Upload(hx));
  HT_CUDA_ASSERT(dw.Upload(hw));
  HT_CUDA_ASSERT(dout.Upload(hout));
  GemmShape s{N, O, I, false, true};
  s.ldc = W;
  auto st = (*gemm_or)->Matmul(s, dx.get(), dw.get(), kT, dout.get() + col0, kT, 1.0f, 0.0f, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> y(size_t(N) * O);
  cpu::Matmul<double>(y.data(), x.data(), w.data(), N, I, O);
  std::vector<double> expect = out0;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o) expect[size_t(n) * W + col0 + o] = y[size_t(n) * O + o];
  ExpectClose(ToDouble(dout.Download()), expect, testing::RelTol<T>(), "slice");
}

// D = X W^T + R with R read from a separate buffer (residual in the epilogue).
TYPED_TEST(GemmTest, SeparateAddendBuffer) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  constexpr DType kT = DTypeOf<T>::value;
  auto gemm_or = Gemm::Create(false);
  ASSERT_TRUE(gemm_or.ok()) << gemm_or.status().ToString();
  const int N = 96, I = 80, O = 56;
  std::mt19937 rng(19);
  std::vector<double> x, w, res;
  auto hx = RandomVector<T>(size_t(N) * I, rng, 1.0f, &x);
  auto hw = RandomVector<T>(size_t(O) * I, rng, 0.1f, &w);
  auto hres = RandomVector<T>(size_t(N) * O, rng, 1.0f, &res);
  DeviceBuffer<T> dx(x.size()), dw(w.size()), dres(res.size()), dout(res.size());
  HT_CUDA_ASSERT(dx.Upload(hx));
  HT_CUDA_ASSERT(dw.Upload(hw));
  HT_CUDA_ASSERT(dres.Upload(hres));
  auto st = (*gemm_or)->Matmul({N, O, I, false, true}, dx.get(), dw.get(), kT, dout.get(), kT, 1.0f,
                               1.0f, nullptr, dres.get());
  ASSERT_TRUE(st.ok()) << st.ToString();
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> y(size_t(N) * O);
  cpu::Matmul<double>(y.data(), x.data(), w.data(), N, I, O);
  for (size_t i = 0; i < y.size(); ++i) y[i] += res[i];
  ExpectClose(ToDouble(dout.Download()), y, testing::RelTol<T>(), "D = XW^T + R");
  EXPECT_EQ(ToDouble(dres.Download()), res) << "the addend buffer must stay untouched";
}

// Odd sizes: rows are only 2-byte aligned, which cuBLASLt may refuse; the
// wrapper then falls back to cublasGemmEx. Either way the result is right.
TYPED_TEST(GemmTest, UnalignedShapesWithSeparateAddend) {
  HT_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  constexpr DType kT = DTypeOf<T>::value;
  auto gemm_or = Gemm::Create(false);
  ASSERT_TRUE(gemm_or.ok()) << gemm_or.status().ToString();
  const int N = 33, I = 35, O = 17;
  std::mt19937 rng(23);
  std::vector<double> x, w, res, dw0, dy;
  auto hx = RandomVector<T>(size_t(N) * I, rng, 1.0f, &x);
  auto hw = RandomVector<T>(size_t(O) * I, rng, 0.1f, &w);
  auto hres = RandomVector<T>(size_t(N) * O, rng, 1.0f, &res);
  auto hdy = RandomVector<T>(size_t(N) * O, rng, 1.0f, &dy);
  auto hdw0 = RandomVector<float>(size_t(O) * I, rng, 1.0f, &dw0);
  DeviceBuffer<T> dx(x.size()), dwt(w.size()), dres(res.size()), dout(res.size()), ddy(dy.size());
  DeviceBuffer<float> ddw(dw0.size());
  HT_CUDA_ASSERT(dx.Upload(hx));
  HT_CUDA_ASSERT(dwt.Upload(hw));
  HT_CUDA_ASSERT(dres.Upload(hres));
  HT_CUDA_ASSERT(ddy.Upload(hdy));
  HT_CUDA_ASSERT(ddw.Upload(hdw0));
  auto st = (*gemm_or)->Matmul({N, O, I, false, true}, dx.get(), dwt.get(), kT, dout.get(), kT,
                               1.0f, 1.0f, nullptr, dres.get());
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = (*gemm_or)->Matmul({O, I, N, true, false}, ddy.get(), dx.get(), kT, ddw.get(), DType::kF32,
                          1.0f, 1.0f, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  std::vector<double> y(size_t(N) * O), rdw = dw0;
  cpu::Matmul<double>(y.data(), x.data(), w.data(), N, I, O);
  for (size_t i = 0; i < y.size(); ++i) y[i] += res[i];
  cpu::MatmulBackward<double>(nullptr, rdw.data(), dy.data(), x.data(), w.data(), N, I, O);
  ExpectClose(ToDouble(dout.Download()), y, testing::RelTol<T>(), "unaligned D = XW^T + R");
  ExpectClose(ToDouble(ddw.Download()), rdw, 1e-4, "unaligned dW");
}

// Autotuning picks only algorithms whose output is bitwise identical to the
// heuristic's choice and never writes C while tuning: a tuned and an untuned
// Gemm give the same bits, on the first (tuning) call and after it, for the
// three model layouts including in-place accumulation.
TEST(GemmAutotune, SameBitsAsTheHeuristicAndCIsUntouched) {
  HT_SKIP_WITHOUT_GPU();
  using T = __nv_bfloat16;
  constexpr DType kT = DType::kBF16;
  auto tuned_or = Gemm::Create(false);
  auto plain_or = Gemm::Create(false);
  ASSERT_TRUE(tuned_or.ok() && plain_or.ok());
  Gemm& tuned = **tuned_or;
  Gemm& plain = **plain_or;
  tuned.set_autotune(true);
  plain.set_autotune(false);
  const int N = 2048, I = 768, O = 1536;
  std::mt19937 rng(23);
  std::vector<double> ignore;
  auto hx = RandomVector<T>(size_t(N) * I, rng, 1.0f, &ignore);
  auto hw = RandomVector<T>(size_t(O) * I, rng, 0.05f, &ignore);
  auto hdy = RandomVector<T>(size_t(N) * O, rng, 1.0f, &ignore);
  auto hdx0 = RandomVector<T>(size_t(N) * I, rng, 1.0f, &ignore);
  auto hdw0 = RandomVector<float>(size_t(O) * I, rng, 1.0f, &ignore);
  struct Outputs {
    DeviceBuffer<T> y, dx;
    DeviceBuffer<float> dw;
  };
  DeviceBuffer<T> dx_in(hx.size()), dw_in(hw.size()), ddy(hdy.size());
  HT_CUDA_ASSERT(dx_in.Upload(hx));
  HT_CUDA_ASSERT(dw_in.Upload(hw));
  HT_CUDA_ASSERT(ddy.Upload(hdy));
  Outputs out[2] = {{DeviceBuffer<T>(hdy.size()), DeviceBuffer<T>(hx.size()), DeviceBuffer<float>(hw.size())},
                    {DeviceBuffer<T>(hdy.size()), DeviceBuffer<T>(hx.size()), DeviceBuffer<float>(hw.size())}};
  for (auto& o : out) {
    HT_CUDA_ASSERT(o.dx.Upload(hdx0));
    HT_CUDA_ASSERT(o.dw.Upload(hdw0));
  }
  for (int call = 0; call < 2; ++call) {
    for (int g = 0; g < 2; ++g) {
      Gemm& gemm = g == 0 ? tuned : plain;
      Outputs& o = out[g];
      auto st = gemm.Matmul({N, O, I, false, true}, dx_in.get(), dw_in.get(), kT, o.y.get(), kT,
                            1.0f, 0.0f, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      st = gemm.Matmul({N, I, O, false, false}, ddy.get(), dw_in.get(), kT, o.dx.get(), kT, 1.0f,
                       1.0f, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      st = gemm.Matmul({O, I, N, true, false}, ddy.get(), dx_in.get(), kT, o.dw.get(), DType::kF32,
                       1.0f, 1.0f, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    HT_CUDA_ASSERT(cudaDeviceSynchronize());
    auto bits_equal = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    EXPECT_TRUE(bits_equal(out[0].y.Download(), out[1].y.Download())) << "Y, call " << call;
    EXPECT_TRUE(bits_equal(out[0].dx.Download(), out[1].dx.Download())) << "dX += , call " << call;
    EXPECT_TRUE(bits_equal(out[0].dw.Download(), out[1].dw.Download())) << "dW += , call " << call;
  }
  const Gemm::TuneStats ts = tuned.tune_stats();
  EXPECT_LE(ts.shapes, 3);
  EXPECT_LE(ts.changed, ts.shapes);
  if (ts.shapes > 0) {
    EXPECT_LE(ts.chosen_us, ts.heuristic_us);
  }
  EXPECT_EQ(plain.tune_stats().shapes, 0);
}

// A zero operand (a LoRA B at init) makes every algorithm's bits agree:
// the tuner must not choose on it (the choice would rest on timing alone and
// differ between processes), only on the first call with a real product.
TEST(GemmAutotune, AnAllZeroProductDefersTheChoice) {
  HT_SKIP_WITHOUT_GPU();
  using T = __nv_bfloat16;
  auto g = Gemm::Create(false);
  ASSERT_TRUE(g.ok());
  (*g)->set_autotune(true);
  const int N = 2048, I = 768, O = 1536;
  std::mt19937 rng(29);
  std::vector<double> ignore;
  auto hx = RandomVector<T>(size_t(N) * I, rng, 1.0f, &ignore);
  auto hw = RandomVector<T>(size_t(O) * I, rng, 0.05f, &ignore);
  auto hc = RandomVector<float>(size_t(N) * O, rng, 1.0f, &ignore);
  DeviceBuffer<T> x(hx.size()), w(hw.size());
  DeviceBuffer<float> c(hc.size());
  HT_CUDA_ASSERT(x.Upload(hx));
  HT_CUDA_ASSERT(cudaMemset(w.get(), 0, hw.size() * sizeof(T)));
  HT_CUDA_ASSERT(c.Upload(hc));
  // C += X W^T with W = 0: the output is C_in, whatever the algorithm.
  ASSERT_TRUE((*g)->Matmul({N, O, I, false, true}, x.get(), w.get(), DType::kBF16, c.get(), DType::kF32,
                           1.0f, 1.0f, nullptr).ok());
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  Gemm::TuneStats ts = (*g)->tune_stats();
  if (ts.deferred == 0 && ts.shapes == 0) GTEST_SKIP() << "cuBLASLt offered one candidate: nothing to tune";
  EXPECT_EQ(ts.shapes, 0);
  EXPECT_EQ(ts.deferred, 1);
  EXPECT_EQ(c.Download(), hc) << "C_in + X 0 = C_in";
  HT_CUDA_ASSERT(w.Upload(hw));
  ASSERT_TRUE((*g)->Matmul({N, O, I, false, true}, x.get(), w.get(), DType::kBF16, c.get(), DType::kF32,
                           1.0f, 1.0f, nullptr).ok());
  HT_CUDA_ASSERT(cudaDeviceSynchronize());
  ts = (*g)->tune_stats();
  EXPECT_EQ(ts.shapes, 1) << "tuned on the first real product";
  EXPECT_EQ(ts.deferred, 1);
}

TEST(GemmArgs, RejectsBadShapesAndTypes) {
  HT_SKIP_WITHOUT_GPU();
  auto gemm_or = Gemm::Create(false);
  ASSERT_TRUE(gemm_or.ok()) << gemm_or.status().ToString();
  DeviceBuffer<float> buf(64);
  auto st = (*gemm_or)->Matmul({0, 4, 4}, buf.get(), buf.get(), DType::kF32, buf.get(), DType::kF32,
                               1, 0, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  st = (*gemm_or)->Matmul({4, 4, 4}, buf.get(), buf.get(), DType::kBF16, buf.get(), DType::kF16, 1,
                          0, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
