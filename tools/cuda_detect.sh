# Sourced by tools/setup.sh and tools/test.sh: whether Bazel will make a CUDA
# build, by the same test as third_party/cuda/cuda_configure.bzl (which is
# what decides). Sets CUDA_HOME (default /usr/local/cuda) and CPU_ONLY_REASON
# (empty for a CUDA build).
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
CUDA_HOME="${CUDA_HOME%/}"
CPU_ONLY_REASON=""
if [ ! -x "$CUDA_HOME/bin/nvcc" ] || [ ! -e "$CUDA_HOME/include/cuda_runtime.h" ]; then
  CPU_ONLY_REASON="no CUDA toolkit at $CUDA_HOME (CUDA_HOME)"
else
  cuda_lacking=()
  for cuda_header in "cuDNN 9:cudnn.h" "NCCL:nccl.h"; do
    found_header=0
    for d in "$CUDA_HOME/include" /usr/include /usr/include/x86_64-linux-gnu; do
      [ -e "$d/${cuda_header#*:}" ] && found_header=1
    done
    [ "$found_header" = 1 ] || cuda_lacking+=("${cuda_header%%:*}")
  done
  if [ ${#cuda_lacking[@]} -gt 0 ]; then
    CPU_ONLY_REASON="the CUDA toolkit at $CUDA_HOME lacks ${cuda_lacking[*]}"
  fi
  unset cuda_lacking cuda_header found_header d
fi
