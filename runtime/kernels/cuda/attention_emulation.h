#pragma once
// Host emulation of the CUDA features the tiled attention kernels use, so
// their exact source (attention_*_kernel.cu.h) runs on a CPU in CI: each GPU
// thread of a block is a fiber (ucontext) on one OS thread; __syncthreads and
// warp-collective operations (shuffles, ldmatrix, mma.sync) are barriers that
// switch fibers, and exchange operands through per-warp slots. The warp-level semantics are
// written from the PTX ISA independently of the kernels' fragment indexing,
// so the emulation checks the kernels' tiling, masking, softmax and indexing.
// cp.async writes land when cp.async.wait_group retires their group, so a
// read before the wait sees poison; hardware timing races beyond that are not
// modelled.
// Test-only: define HT_ATTENTION_HOST_EMULATION and include this first.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ucontext.h>
#include <type_traits>
#include <vector>

#ifndef HT_ATTENTION_HOST_EMULATION
#error "define HT_ATTENTION_HOST_EMULATION before including attention_emulation.h"
#endif

#undef __global__
#undef __device__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace ht_emu {

constexpr int kWarpSize = 32;
constexpr size_t kFiberStack = 256 * 1024;

struct WarpSlots {
  const void* addr[kWarpSize];
  uint32_t a[kWarpSize][4];
  uint32_t b[kWarpSize][2];
  float c[kWarpSize][4];
  float f[kWarpSize];
  int arrived = 0;
  unsigned generation = 0;
};

// One thread block: its GPU threads are fibers (ucontext) run cooperatively
// on the calling OS thread, switching only at barriers. Deterministic, and
// far cheaper than an OS thread per GPU thread.
// A cp.async copy in flight: the source is read at issue (inputs are
// constant), the destination written only when a wait retires its group.
struct PendingCopy {
  void* dst;
  unsigned char bytes[16];
};
struct CopyQueue {
  std::vector<PendingCopy> open;                   // not yet committed
  std::vector<std::vector<PendingCopy>> committed;  // oldest first
};

struct Block {
  Block(int n_threads, size_t smem_bytes)
      : threads(n_threads), smem(smem_bytes + 16, 0xFF), warps(n_threads / kWarpSize),
        fibers(n_threads), copies(n_threads) {}
  int threads;
  std::vector<unsigned char> smem;  // 0xFF: NaN in every float type until written
  std::vector<WarpSlots> warps;
  int block_arrived = 0;
  unsigned block_generation = 0;
  int finished = 0;
  std::vector<ucontext_t> fibers;
  std::vector<CopyQueue> copies;  // per thread
  ucontext_t host;
};

inline Block* tl_block = nullptr;
inline int tl_tid = 0;
inline uint3 tl_block_idx;
inline dim3 tl_grid_dim;
inline dim3 tl_block_dim;

inline unsigned char* BlockSmem() {
  auto addr = reinterpret_cast<uintptr_t>(tl_block->smem.data());
  return tl_block->smem.data() + ((16 - addr % 16) % 16);
}
inline int Lane() { return tl_tid % kWarpSize; }
inline WarpSlots& Slots() { return tl_block->warps[tl_tid / kWarpSize]; }

// Switches from the running fiber to fiber `next`.
inline void SwitchTo(int next) {
  const int self = tl_tid;
  if (next == self) return;
  tl_tid = next;
  swapcontext(&tl_block->fibers[self], &tl_block->fibers[next]);
  tl_tid = self;  // resumed
}

// All 32 lanes of the caller's warp meet here.
inline void WarpSync() {
  WarpSlots& w = Slots();
  const unsigned gen = w.generation;
  const int warp_base = tl_tid - Lane();
  if (++w.arrived == kWarpSize) {
    w.arrived = 0;
    ++w.generation;
    return;
  }
  while (w.generation == gen) SwitchTo(warp_base + (tl_tid - warp_base + 1) % kWarpSize);
}

inline void BlockSync() {
  Block& b = *tl_block;
  const unsigned gen = b.block_generation;
  if (++b.block_arrived == b.threads) {
    b.block_arrived = 0;
    ++b.block_generation;
    return;
  }
  while (b.block_generation == gen) SwitchTo((tl_tid + 1) % b.threads);
}

inline float Bf16Bits(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float HalfBits(uint16_t bits) {
  __half_raw r;
  r.x = bits;
  return __half2float(__half(r));
}

// Element `half` (0 = low 16 bits) of a packed register as float.
template <typename T>
float Unpack(uint32_t reg, int half) {
  const uint16_t bits = uint16_t(half == 0 ? reg & 0xFFFFu : reg >> 16);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return Bf16Bits(bits);
  } else {
    return HalfBits(bits);
  }
}

// Runs `body` as a grid of blocks of `threads` fibers each.
template <typename Body>
void LaunchGrid(dim3 grid, int threads, size_t smem_bytes, Body body);

}  // namespace ht_emu

// Built-in variables of the running fiber.
#define threadIdx (uint3{unsigned(::ht_emu::tl_tid), 0u, 0u})
#define blockIdx (::ht_emu::tl_block_idx)
#define gridDim (::ht_emu::tl_grid_dim)
#define blockDim (::ht_emu::tl_block_dim)

#define HT_DYNAMIC_SMEM(name) unsigned char* name = ::ht_emu::BlockSmem()

inline void __syncthreads() { ht_emu::BlockSync(); }

inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) {
  auto& s = ht_emu::Slots();
  const int lane = ht_emu::Lane();
  s.f[lane] = v;
  ht_emu::WarpSync();
  const float r = s.f[lane ^ lane_mask];
  ht_emu::WarpSync();
  return r;
}

using std::max;
using std::min;

namespace hypertrain::kernels::cuda::internal {

// D = A(16x16) B(16x8) + C with the PTX m16n8k16 fragment layouts: lane l
// (g = l / 4, t = l % 4) holds A[g + 8(r & 1)][2t + 8(r >> 1) + h] in a[r]
// half h; B[2t + 8r + h][g] in b[r] half h; C[g + 8(r >> 1)][2t + (r & 1)]
// in c[r]. Products are formed in double, then rounded to fp32 per output.
template <typename T>
inline void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  auto& s = ht_emu::Slots();
  const int lane = ht_emu::Lane();
  for (int r = 0; r < 4; ++r) s.a[lane][r] = a[r];
  s.b[lane][0] = b0;
  s.b[lane][1] = b1;
  ht_emu::WarpSync();
  auto A = [&](int row, int k) {
    const int l = (row % 8) * 4 + (k % 8) / 2;
    const int r = (row / 8) + 2 * (k / 8);
    return double(ht_emu::Unpack<T>(s.a[l][r], k % 2));
  };
  auto B = [&](int k, int n) {
    const int l = n * 4 + (k % 8) / 2;
    return double(ht_emu::Unpack<T>(s.b[l][k / 8], k % 2));
  };
  const int g = lane / 4, t = lane % 4;
  float d[4];
  for (int r = 0; r < 4; ++r) {
    const int row = g + 8 * (r >> 1), col = 2 * t + (r & 1);
    double acc = c[r];
    for (int k = 0; k < 16; ++k) acc += A(row, k) * B(k, col);
    d[r] = float(acc);
  }
  ht_emu::WarpSync();  // operands consumed before anyone reuses the slots
  for (int r = 0; r < 4; ++r) c[r] = d[r];
}

// ldmatrix .x4: lane i addresses row i % 8 of matrix i / 8. Without .trans
// r[m] = {M[lane/4][2(lane%4)], M[lane/4][2(lane%4)+1]}; with .trans
// r[m] = {M[2(lane%4)][lane/4], M[2(lane%4)+1][lane/4]} (low half first).
inline void LdMatrixImpl(uint32_t (&r)[4], const void* row_addr, bool trans) {
  auto& s = ht_emu::Slots();
  const int lane = ht_emu::Lane();
  s.addr[lane] = row_addr;
  ht_emu::WarpSync();
  for (int m = 0; m < 4; ++m) {
    uint16_t lo, hi;
    if (!trans) {
      const auto* row = static_cast<const uint16_t*>(s.addr[m * 8 + lane / 4]);
      lo = row[2 * (lane % 4)];
      hi = row[2 * (lane % 4) + 1];
    } else {
      lo = static_cast<const uint16_t*>(s.addr[m * 8 + 2 * (lane % 4)])[lane / 4];
      hi = static_cast<const uint16_t*>(s.addr[m * 8 + 2 * (lane % 4) + 1])[lane / 4];
    }
    r[m] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
  ht_emu::WarpSync();
}
inline void LdMatrixX4(uint32_t (&r)[4], const void* row_addr) { LdMatrixImpl(r, row_addr, false); }
inline void LdMatrixX4Trans(uint32_t (&r)[4], const void* row_addr) {
  LdMatrixImpl(r, row_addr, true);
}

// cp.async with deferred completion: a kernel that reads a tile before
// waiting for its group sees the NaN poison instead of the data.
inline void CpAsync16(void* smem, const void* gmem, bool valid) {
  ht_emu::PendingCopy c;
  c.dst = smem;
  if (valid) {
    std::memcpy(c.bytes, gmem, 16);
  } else {
    std::memset(c.bytes, 0, 16);
  }
  ht_emu::tl_block->copies[ht_emu::tl_tid].open.push_back(c);
}
inline void CpAsyncCommit() {
  auto& q = ht_emu::tl_block->copies[ht_emu::tl_tid];
  q.committed.push_back(std::move(q.open));
  q.open.clear();
}
// Retires all but the newest N committed groups of the calling thread.
template <int N>
inline void CpAsyncWait() {
  auto& q = ht_emu::tl_block->copies[ht_emu::tl_tid];
  while (q.committed.size() > size_t(N)) {
    for (const auto& c : q.committed.front()) std::memcpy(c.dst, c.bytes, 16);
    q.committed.erase(q.committed.begin());
  }
}

}  // namespace hypertrain::kernels::cuda::internal

namespace ht_emu {

template <typename Body>
struct FiberStart {
  static void Run(unsigned lo, unsigned hi) {
    const uintptr_t p = (uintptr_t(hi) << 32) | lo;
    (*reinterpret_cast<Body*>(p))();
    ++tl_block->finished;
    // Let the others finish; the last one returns to the host context.
    while (tl_block->finished < tl_block->threads) SwitchTo((tl_tid + 1) % tl_block->threads);
    setcontext(&tl_block->host);
  }
};

template <typename Body>
void LaunchGrid(dim3 grid, int threads, size_t smem_bytes, Body body) {
  std::vector<std::unique_ptr<char[]>> stacks(threads);
  for (auto& st : stacks) st.reset(new char[kFiberStack]);
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        Block block(threads, smem_bytes);
        tl_block = &block;
        tl_block_idx = uint3{x, y, z};
        tl_grid_dim = grid;
        tl_block_dim = dim3(threads, 1, 1);
        const uintptr_t p = reinterpret_cast<uintptr_t>(&body);
        for (int t = 0; t < threads; ++t) {
          getcontext(&block.fibers[t]);
          block.fibers[t].uc_stack.ss_sp = stacks[t].get();
          block.fibers[t].uc_stack.ss_size = kFiberStack;
          block.fibers[t].uc_link = nullptr;
          makecontext(&block.fibers[t], reinterpret_cast<void (*)()>(&FiberStart<Body>::Run), 2,
                      unsigned(p & 0xFFFFFFFFu), unsigned(p >> 32));
        }
        tl_tid = 0;
        swapcontext(&block.host, &block.fibers[0]);
        tl_block = nullptr;
      }
    }
  }
}

}  // namespace ht_emu
