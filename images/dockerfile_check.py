#!/usr/bin/env python3
"""What CI can check of the images without a container engine or network.

hadolint is not packaged for Debian, so the Dockerfile rules that matter here
are checked directly, plus what a linter cannot know:
  - every base image has an explicit tag, never `latest`; the final stage runs
    as a numeric non-root USER;
  - apt-get: update and install in one RUN, -y, --no-install-recommends, and
    the lists removed in the same layer; downloads with curl -f; no ADD of URLs;
    COPY sources exist;
  - the trainer image: EFA installer >= 1.39 (aws-ofi-nccl inside), the source
    fallback configured with --enable-platform-aws and hwloc, its inline pins
    equal to the package lists';
  - the package lists: every Debian name exists in bookworm (apt-cache, when
    this machine is bookworm), the NVIDIA pins equal the toolkit the build
    compiles against (CUDA, cuDNN and NCCL headers, when installed);
  - the trainer runtime list covers every system library `hypertrain` links.
Prints one line per check ("ok", "FAIL" or "skip: why"), then
"N passed, N failed"; exits 1 on any failure.

  dockerfile_check.py REPO_ROOT [HYPERTRAIN_BINARY]
"""
import os
import re
import subprocess
import sys

PASSED, FAILED = [], []


def check(name, ok, detail=""):
    (PASSED if ok else FAILED).append(name)
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok or not detail else ": " + detail))


def skip(name, why):
    print("skip  " + name + ": " + why)


def instructions(path):
    """(keyword, argument) per instruction, continuation lines joined, comments dropped."""
    out, cur = [], ""
    for line in open(path):
        s = line.rstrip("\n")
        if not cur and (s.strip().startswith("#") or not s.strip()):
            continue
        if s.strip().startswith("#"):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        kw, _, arg = cur.strip().partition(" ")
        out.append((kw.upper(), arg.strip()))
        cur = ""
    return out


def package_list(path):
    return [l.strip() for l in open(path) if l.strip() and not l.startswith("#")]


def check_dockerfile(root, name):
    path = os.path.join(root, "images", name)
    ins = instructions(path)
    args = {}
    stages = []
    for kw, arg in ins:
        if kw == "ARG" and "=" in arg:
            k, v = arg.split("=", 1)
            args.setdefault(k, v)
        if kw == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), arg.split()[0])
            stages.append({"image": image, "user": None})
        if kw == "USER" and stages:
            stages[-1]["user"] = arg
    for s in stages:
        img = s["image"]
        tagged = img == "scratch" or (":" in img.split("/")[-1] and not img.endswith(":latest"))
        check(f"{name}: base image {img} has an explicit tag", tagged)
    final_user = stages[-1]["user"] if stages else None
    check(f"{name}: final stage runs as a numeric non-root USER", bool(final_user) and
          re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", final_user or "") is not None, f"USER {final_user}")
    for i, (kw, arg) in enumerate(ins):
        if kw == "RUN" and "apt-get install" in arg:
            where = f"{name}: RUN #{i} apt-get"
            check(where + " updates, installs -y --no-install-recommends and removes the lists in one layer",
                  "apt-get update" in arg and " -y" in arg and "--no-install-recommends" in arg
                  and re.search(r"rm -rf [^&;]*/var/lib/apt/lists", arg) is not None, arg[:120])
        calls = re.findall(r"(?:^|&&|;|\|\||then)\s*curl\s+(\S+)", arg) if kw == "RUN" else []
        if calls:
            check(f"{name}: RUN #{i} downloads fail on HTTP errors (curl -f)",
                  all(re.match(r"-\w*f", c) for c in calls), " ".join(calls))
        if kw == "ADD":
            check(f"{name}: no ADD of a URL", "://" not in arg, arg)
        if kw == "COPY" and "--from=" not in arg:
            srcs = arg.split()[:-1]
            for src in srcs:
                if src != ".":
                    check(f"{name}: COPY source {src} exists", os.path.exists(os.path.join(root, src)))
    return ins, args


def version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v))


def check_trainer(root, ins, args):
    efa = args.get("EFA_INSTALLER_VERSION", "0")
    check(f"trainer.Dockerfile: EFA installer {efa} >= 1.39 (ships aws-ofi-nccl)", version_tuple(efa) >= (1, 39))
    text = " ".join(a for _, a in ins)
    configure = re.search(r"\./configure[^&]*", text)
    check("trainer.Dockerfile: aws-ofi-nccl fallback configured with --enable-platform-aws and hwloc",
          configure is not None and "--enable-platform-aws" in configure.group(0)
          and "--with-hwloc" in configure.group(0) and "libhwloc-dev" in text)
    pins = {p.split("=")[0]: p for f in ("trainer-cuda-build.txt", "trainer-cuda-runtime.txt")
            for p in package_list(os.path.join(root, "images/packages", f))}
    for inline in re.findall(r"\b([a-z0-9.+-]+=[^\s]+)", text):
        pkg = inline.split("=")[0]
        if pkg in pins:
            check(f"trainer.Dockerfile: inline pin {inline} equals the package list's", inline == pins[pkg], pins[pkg])


def check_debian_names(root):
    try:
        codename = re.search(r"VERSION_CODENAME=(\w+)", open("/etc/os-release").read()).group(1)
    except (OSError, AttributeError):
        codename = ""
    if codename != "bookworm":
        skip("Debian package names", f"this machine is '{codename or 'unknown'}', the images' base is bookworm: "
             "apt-cache here would answer for another suite")
        return
    for f in ("build-debian.txt", "trainer-runtime-debian.txt"):
        names = package_list(os.path.join(root, "images/packages", f))
        r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + names, capture_output=True, text=True)
        found = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
        missing = [n for n in names if n not in found]
        check(f"{f}: all {len(names)} names exist in bookworm", not missing, "missing " + ", ".join(missing))


def header_define(path, name):
    m = re.search(rf"#define {name}\s+(\d+)", open(path).read())
    return m.group(1) if m else None


def check_cuda_pins(root):
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    inc = os.path.join(cuda, "include")
    if not os.path.exists(os.path.join(inc, "cuda_runtime_api.h")):
        skip("CUDA pins", f"no CUDA toolkit at {cuda}: nothing to compare the image's pins with")
        return
    pins = " ".join(package_list(os.path.join(root, "images/packages", "trainer-cuda-build.txt"))
                    + package_list(os.path.join(root, "images/packages", "trainer-cuda-runtime.txt")))
    cudart = int(header_define(os.path.join(inc, "cuda_runtime_api.h"), "CUDART_VERSION"))
    major, minor = cudart // 1000, cudart % 1000 // 10
    check(f"CUDA pins are {major}.{minor} like the toolkit", f"-{major}-{minor}" in pins
          and not re.search(rf"-{major}-(?!{minor}\b)\d+\b", pins))
    nccl = os.path.join(inc, "nccl.h")
    if os.path.exists(nccl):
        v = ".".join(header_define(nccl, f"NCCL_{k}") for k in ("MAJOR", "MINOR", "PATCH"))
        check(f"NCCL pins are {v} like the build's nccl.h", all(p == f"{v}-1+cuda{major}.{minor}" for p in
                                                               re.findall(r"libnccl[\w-]*=(\S+)", pins)), pins)
    cudnn = os.path.join(inc, "cudnn_version.h")
    if os.path.exists(cudnn):
        v = ".".join(header_define(cudnn, f"CUDNN_{k}") for k in ("MAJOR", "MINOR", "PATCHLEVEL"))
        got = re.findall(r"libcudnn[\w-]*=(\S+)", pins)
        check(f"cuDNN pins are {v} like the build's cudnn_version.h", got and all(p == v + ".*" for p in got), pins)


# Sonames of NVIDIA's libraries -> the runtime list entry that provides them.
NVIDIA_SONAMES = {"libcudart": "cuda-cudart-13-0", "libcublas": "libcublas-13-0", "libcublasLt": "libcublas-13-0",
                  "libcudnn": "libcudnn9-cuda-13", "libnccl": "libnccl2"}
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:12-slim


def check_trainer_libraries(root, binary):
    if not binary or not os.path.exists(binary):
        skip("trainer runtime libraries", "no hypertrain binary given")
        return
    if subprocess.run(["which", "dpkg"], capture_output=True).returncode != 0:
        skip("trainer runtime libraries", "no dpkg here to name the packages that own the libraries")
        return
    debian = set(package_list(os.path.join(root, "images/packages", "trainer-runtime-debian.txt")))
    nvidia = {p.split("=")[0] for p in package_list(os.path.join(root, "images/packages", "trainer-cuda-runtime.txt"))}
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        subprocess.run(["readelf", "-d", binary], capture_output=True, text=True).stdout)
    resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(["ldd", binary], capture_output=True,
                                                                       text=True).stdout, re.M))
    for lib in needed:
        if lib.startswith("ld-linux"):
            continue  # the loader, from libc6 in the base image
        path = resolved.get(lib)
        if path is None:
            check(f"hypertrain's {lib} resolves", False)
            continue
        stem = lib.split(".so")[0]
        if stem in NVIDIA_SONAMES:
            check(f"hypertrain's {lib} comes from the image's NVIDIA list ({NVIDIA_SONAMES[stem]})",
                  NVIDIA_SONAMES[stem] in nvidia)
            continue
        owner = ""
        for p in (path, os.path.realpath(path)):
            r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
            if r.returncode == 0:
                owner = r.stdout.split(":")[0]
                break
        if not owner:
            continue  # one of ours (bazel-out): linked statically in the image build (--config=gpu)
        check(f"hypertrain's {lib} ({owner}) is in trainer-runtime-debian.txt", owner in debian | BASE_PACKAGES)


def main():
    root = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else ""
    check_dockerfile(root, "operator.Dockerfile")
    ins, args = check_dockerfile(root, "trainer.Dockerfile")
    check_trainer(root, ins, args)
    check_debian_names(root)
    check_cuda_pins(root)
    check_trainer_libraries(root, binary)
    print(f"{len(PASSED)} passed, {len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
