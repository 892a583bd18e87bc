"""gpu_test: a kernel's parity test against the CPU reference, on a GPU.

Every such test links the CUDA device helper (it skips, counted as skipped,
where no GPU is visible) and gtest_main; srcs default to NAME.cc, size to small.
"""

def gpu_test(name, srcs = None, deps = [], size = "small", **kwargs):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = deps + [
            "//runtime/testing:cuda_device",
            "//third_party:gtest_main",
        ],
        **kwargs
    )
