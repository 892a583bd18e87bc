"""cuda_library: compile .cu sources with nvcc into a static archive.

No rules_cuda offline, so nvcc runs in a genrule and the archive is wrapped in
a cc_library; dependants use the target like any other C++ library.
Device code is built for sm_80 (A100), sm_86 (A10G) and sm_90a (H100/H200),
plus PTX for compute_90 so newer GPUs can JIT; with --define=cuda_arch=compile_check
(tools/test.sh where no GPU is visible) for sm_90a only. nvcc is the toolkit's that
@cuda found ($CUDA_HOME); in a CPU-only build (no toolkit, or --config=cpu)
these targets are incompatible and skipped.
"""

load("@cuda//:defs.bzl", "NVCC", "cuda_compatible")

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_86,code=sm_86",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_90,code=compute_90",
]

# --define=cuda_arch=compile_check (tools/test.sh without a GPU): one target,
# enough to check that the device code compiles; nothing runs it.
CUDA_ARCH_FLAGS_COMPILE_CHECK = ["-gencode=arch=compute_90a,code=sm_90a"]

def _nvcc_cmd(name, flags):
    """The genrule command: each .cu source to an object, all into one archive."""
    return ("set -e; objs=; for f in $(SRCS); do case $$f in *.cu) " +
            "o=$(@D)/" + name + "_$$(echo $$f | tr / _).o; " +
            NVCC + " " + " ".join(flags) + " -c $$f -o $$o; objs=\"$$objs $$o\";; esac; done; " +
            "ar rcs $@ $$objs")

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_hdrs = [], copts = [], visibility = None, **kwargs):
    """A C++ library whose .cu sources are compiled by nvcc.

    Args:
      name: target name.
      srcs: .cu (and .cc) sources; .cc files go to the C++ compiler.
      hdrs: public headers (usable from .cc and .cu files).
      deps: cc_library dependencies of the wrapping library.
      nvcc_hdrs: headers (files or filegroups) from other packages that the .cu
        files include; nvcc runs in a genrule and sees only declared files.
      copts: extra nvcc flags.
      visibility: as usual.
      **kwargs: passed to the wrapping cc_library.
    """
    cu_srcs = [s for s in srcs if s.endswith(".cu")]
    cc_srcs = [s for s in srcs if not s.endswith(".cu")]
    archive = "lib" + name + "_cuda.a"
    common = [
        "-O3",
        "-std=c++20",
        "--expt-relaxed-constexpr",
        "-Xcompiler=-fPIC",
        "-lineinfo",
        "-I.",
        "-I$(GENDIR)",
    ]
    cmd = select({
        "//third_party/cuda:arch_compile_check": _nvcc_cmd(name, common + CUDA_ARCH_FLAGS_COMPILE_CHECK + copts),
        "//conditions:default": _nvcc_cmd(name, common + CUDA_ARCH_FLAGS + copts),
    })
    native.genrule(
        name = name + "_nvcc",
        srcs = cu_srcs + hdrs + nvcc_hdrs,
        outs = [archive],
        cmd = cmd,
        message = "nvcc " + name,
        target_compatible_with = cuda_compatible(),
    )
    native.cc_library(
        name = name,
        srcs = cc_srcs + [archive],
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        linkstatic = 1,
        visibility = visibility,
        **kwargs
    )
