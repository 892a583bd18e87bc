# Sourced on a GPU machine (by the bundle's run.sh and tools/gpu_bench_sweep.sh):
# sets CUDA_LIB_DIRS to the machine's CUDA libraries, in search order:
# GPU_LIB_DIRS (if set), /usr/local/cuda/lib64, the directory of the NEWEST
# cuDNN 9 found anywhere (a PyTorch wheel often brings a newer one than the
# system's: 9.19 vs 9.14 gave +0.5% on 125m), then NCCL's and cuBLAS's if the
# toolkit lacks them. Prints the cuDNN it chose.
cuda_lib_dirs() {
  local dirs=/usr/local/cuda/lib64 best="" best_v=0 f v name d
  while read -r f; do
    [ -n "$f" ] || continue
    v=$(python3 -c 'import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).cudnnGetVersion())' "$f" 2>/dev/null)
    [[ "$v" =~ ^[0-9]+$ ]] || continue
    if [ "$v" -gt "$best_v" ]; then best_v=$v; best=$(dirname "$f"); fi
  done < <(find / -xdev -name 'libcudnn.so.9' -not -path '/proc/*' 2>/dev/null)
  if [ -n "$best" ]; then
    dirs="$best:$dirs"
    echo "cuDNN $best_v from $best" >&2
  fi
  for name in libnccl.so.2 libcublasLt.so.13; do
    if ! ls /usr/local/cuda/lib64/$name >/dev/null 2>&1; then
      d=$(find / -xdev -name "$name" -not -path '/proc/*' 2>/dev/null | head -n1 | xargs -r dirname)
      [ -n "$d" ] && dirs="$dirs:$d"
    fi
  done
  CUDA_LIB_DIRS="${GPU_LIB_DIRS:+$GPU_LIB_DIRS:}$dirs"
}
cuda_lib_dirs
