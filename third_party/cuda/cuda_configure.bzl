"""cuda_configure: the @cuda repository, from the CUDA toolkit if there is one.

The toolkit is looked up at $CUDA_HOME (default /usr/local/cuda). With
bin/nvcc and include/cuda_runtime.h there, and cudnn.h and nccl.h there or in
/usr/include, @cuda exposes the toolkit's headers and libraries
(toolkit.BUILD.tpl); otherwise it is a stub with the same target names, every one incompatible with the build (stub.BUILD.tpl), so `bazel build
//...` skips the CUDA backend, kernels and tests, and `bazel test //...` lists
the CUDA tests as SKIPPED.

Either way @cuda//:defs.bzl says what was found:
  CUDA_FOUND   True when the toolkit is there
  CUDA_HOME    where it was looked up
  NVCC         the nvcc path ("" without a toolkit)
  if_cuda(yes, no = [])   `yes` in a CUDA build, `no` in a CPU-only one
  cuda_compatible()       target_compatible_with for CUDA-only targets
  CUDA_OFF_REASON_DEFINES local_defines naming why a build is CPU-only
A toolkit can also be left out on purpose: --config=cpu (--define=cuda=off).
Changing CUDA_HOME re-runs the rule.
"""

def _impl(rctx):
    home = rctx.os.environ.get("CUDA_HOME", "") or "/usr/local/cuda"
    if home != "/" and home.endswith("/"):
        home = home[:-1]
    # Quotes would end the C string the reason becomes.
    shown = home.replace("'", "").replace('"', "").replace("\\", "")
    reason = ""
    if not (rctx.path(home + "/bin/nvcc").exists and rctx.path(home + "/include/cuda_runtime.h").exists):
        reason = "no CUDA toolkit at %s (CUDA_HOME) when it was built" % shown
    else:
        # cuDNN and NCCL come with the toolkit or from the distribution.
        lacking = [
            what
            for what, header in [("cuDNN 9", "cudnn.h"), ("NCCL", "nccl.h")]
            if not [d for d in [home + "/include", "/usr/include", "/usr/include/x86_64-linux-gnu"]
                    if rctx.path(d + "/" + header).exists]
        ]
        if lacking:
            reason = "the CUDA toolkit at %s lacked %s when it was built" % (shown, " and ".join(lacking))
    found = not reason
    subs = {"%{cuda_home}": home}
    if found:
        for d in ["include", "lib64"]:
            rctx.symlink(home + "/" + d, d)
        rctx.template("BUILD", Label("//third_party/cuda:toolkit.BUILD.tpl"), subs)
    else:
        rctx.template("BUILD", Label("//third_party/cuda:stub.BUILD.tpl"), subs)
    rctx.template("defs.bzl", Label("//third_party/cuda:defs.bzl.tpl"), {
        "%{found}": "True" if found else "False",
        "%{cuda_home}": home,
        "%{nvcc}": home + "/bin/nvcc" if found else "",
        "%{reason}": reason,
    })

cuda_configure = repository_rule(
    implementation = _impl,
    environ = ["CUDA_HOME"],
    local = True,
)
