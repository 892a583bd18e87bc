#!/usr/bin/env bash
# Bundles built binaries for a GPU machine that has CUDA 13 and NCCL but none
# of our Debian libraries (Ubuntu 24.04, glibc 2.39).
#
#   tools/gpu_bundle.sh [TARGET_PATTERN...]     default: every cc_test and binary under
#                                               //runtime/... and //tests/ckpt/... (the whole-job GPU checkpoint tests)
#
# GPU_BUNDLE_TESTS (regex, default: tests that need a GPU) picks the test
# binaries; CPU-only tests run in CI. Binaries are stripped of debug info and
# the bundle is also packed into .gpu-pack/bundle.tar.xz (xz -9e: its 64 MiB
# window finds the libraries every test binary links; 31 MB for all of
# //runtime/... where -6 gave 63 MB) so it
# fits what a device call carries: unpack it there with `tar -xJf`.
#
# Writes .gpu/ (git-ignored): bin/ (the executables), lib/ (non-system shared
# libraries found with ldd: yaml-cpp, spdlog, fmt, gloo, openblas, cpprest,
# boost, ...), run.sh (runs every test binary and the given commands with the
# right library path, ending with "N passed, N failed"). CUDA, cuBLAS, cuDNN and
# NCCL are NOT bundled: run.sh finds the GPU machine's own copies.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=("//runtime/..." "//tests/ckpt/...")

bazel build --config=gpu "${patterns[@]}" >/dev/null 2>&1 || bazel build --config=gpu "${patterns[@]}"
bin_dir=$(bazel info --config=gpu bazel-bin 2>/dev/null)
union=$(printf ' + %s' "${patterns[@]}"); union=${union# + }
tests=$(bazel query "kind('cc_test', $union)" 2>/dev/null)
binaries=$(bazel query "kind('cc_binary', $union)" 2>/dev/null)

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tests"
to_path() { local l=${1#//}; echo "$bin_dir/${l/://}"; }
# Test names carry their package (runtime/backends/cpu:backend_test -> runtime_cpu_backend_test).
test_regex=${GPU_BUNDLE_TESTS:-cuda|attention|nccl|gpu}
for t in $tests; do
  l=${t#//}; name=$(echo "${l/://}" | tr / _)
  [[ "$name" =~ $test_regex ]] || continue
  [[ "$name" =~ emulation ]] && continue  # a CPU test of GPU code; CI runs it
  [[ "$name" =~ nccl_net ]] && continue   # the NCCL plugin preflight on a fake plugin (test data); CI runs it
  cp -L "$(to_path "$t")" "$out/tests/$name"
done
for b in $binaries; do cp -L "$(to_path "$b")" "$out/bin/"; done

# Libraries the GPU machine has itself: glibc, the C++ runtime (newer there),
# and the CUDA stack (must match its driver).
is_system_lib() {
  case "$(basename "$1")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) return 0;;
    libcuda.so*|libcudart.so*|libcublas*.so*|libcudnn*.so*|libnccl.so*|libnvrtc*.so*|libnvJitLink*.so*) return 0;;
    linux-vdso*) return 0;;
  esac
  return 1
}
for f in "$out"/tests/* "$out"/bin/*; do
  [ -f "$f" ] || continue
  ldd "$f" 2>/dev/null | awk '/=> \// {print $3}' | while read -r lib; do
    is_system_lib "$lib" || cp -Ln "$lib" "$out/lib/" 2>/dev/null || true
  done
done

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine: every bundled test, then any command given, e.g.
#   .gpu/run.sh                         # all tests
#   .gpu/run.sh bin/hypertrain bench    # tests, then a benchmark
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The machine's own CUDA stack: the toolkit, the newest cuDNN found, pip's
# nvidia-* wheels for what the toolkit lacks; GPU_LIB_DIRS first if set.
. "$here/cuda_libs.sh"
export LD_LIBRARY_PATH="$here/lib:$CUDA_LIB_DIRS:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
passed=0; failed=0; skipped=0
for t in "$here"/tests/*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  if [ -n "${GPU_TEST_FILTER:-}" ] && ! [[ "$name" =~ $GPU_TEST_FILTER ]]; then continue; fi
  xml=$(mktemp --suffix=.xml); rm -f "$xml"
  timeout "${GPU_TEST_TIMEOUT:-300}" "$t" --gtest_output="xml:$xml" >"$xml.log" 2>&1
  rc=$?
  read -r p f s < <(python3 "$here/count_xml.py" "$xml" "$rc")
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  echo "[$([ "$f" -eq 0 ] && echo PASS || echo FAIL) rc=$rc] $name: $p passed, $f failed, $s skipped"
  if [ "$f" -ne 0 ] || [ "$s" -ne 0 ]; then grep -vE '^\[ +(RUN|OK) +\]' "$xml.log" | tail -n 40; fi
done
echo "$passed passed, $failed failed, $skipped skipped"
if [ $# -gt 0 ]; then cd "$here" && "$@"; fi
[ "$failed" -eq 0 ]
RUN
cp tools/test_summary.py "$out/test_summary.py"
cp tools/gpu_cuda_libs.sh "$out/cuda_libs.sh"
cat > "$out/count_xml.py" <<'PY'
# Prints "passed failed skipped" for one gtest XML file and the binary's exit code.
import collections, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_summary import count_xml
path, rc = sys.argv[1], int(sys.argv[2])
p = f = s = 0
if os.path.exists(path):
    try:
        p, f, s, _ = count_xml(path, collections.Counter())
    except Exception as e:  # a broken file is a failure, never a silent zero
        print(f"count_xml {path}: {e}", file=sys.stderr)
        f = 1
if rc != 0 and f == 0:
    f = 1
print(p, f, s)
PY
chmod +x "$out/run.sh"
# Only tests, or only binaries, when the patterns pick just those.
built=$(ls "$out"/bin/* "$out"/tests/* 2>/dev/null || true)
[ -n "$built" ] || { echo "gpu_bundle: nothing to bundle for ${patterns[*]}" >&2; exit 1; }
chmod u+w $built
strip --strip-debug $built
mkdir -p .gpu-pack
tar -cf - "$out" | xz -T2 -9e > .gpu-pack/bundle.tar.xz
du -sh "$out" | awk '{print "bundle: " $1 " in '"$out"'"}'
ls -la .gpu-pack/bundle.tar.xz
