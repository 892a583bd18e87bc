#pragma once
// NVTX ranges (seen in Nsight Systems) around data, forward/backward and
// optimizer. NVTX v3 is header-only: without a profiler attached a range costs
// a branch. Builds without HT_WITH_NVTX get a no-op.
#if defined(HT_WITH_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace hypertrain::train {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#if defined(HT_WITH_NVTX)
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#if defined(HT_WITH_NVTX)
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace hypertrain::train
