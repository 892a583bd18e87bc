# hypertrain trainer image: `hypertrain` (launch + train) for ml.p4d/p5/p5e/p5en
# (EFA with GPUDirect RDMA) and ml.g5/g6 (EFA without RDMA, or TCP).
#   tools/build-images.sh REGISTRY TAG
#   docker build -f images/trainer.Dockerfile --build-arg VERSION=$(git describe --tags --always --dirty) -t REGISTRY/hypertrain:TAG .
#
# One userspace with the build: Debian 12 (the distribution CI builds and tests
# on) plus NVIDIA's CUDA repository for Debian 12, pinned to the CUDA, cuDNN and
# NCCL versions the build compiles against (images/packages/*.txt; CI checks the
# pins and package names, images/image_check_test.sh).
#
# NCCL over EFA needs NCCL's libfabric network plugin (aws-ofi-nccl). The EFA
# installer ships it from 1.39 on (/opt/amazon/ofi-nccl); BUILD_OFI_NCCL=1
# builds it from source instead (--enable-platform-aws, hwloc) for an installer
# without it. `hypertrain launch` logs which plugin NCCL will load and warns
# on an EFA instance without one (docs/USER_GUIDE.md, "EFA").
ARG DEBIAN_IMAGE=debian:12
ARG DEBIAN_SLIM_IMAGE=debian:12-slim
ARG CUDA_REPO=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64

FROM ${DEBIAN_IMAGE} AS build
ARG CUDA_REPO
COPY images/packages/build-debian.txt images/packages/trainer-cuda-build.txt /tmp/
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl \
    && curl -fsSLo /tmp/cuda-keyring.deb "${CUDA_REPO}/cuda-keyring_1.1-1_all.deb" \
    && dpkg -i /tmp/cuda-keyring.deb && apt-get update \
    && grep -hv '^#' /tmp/build-debian.txt /tmp/trainer-cuda-build.txt \
       | xargs env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    && rm -rf /var/lib/apt/lists/* /tmp/cuda-keyring.deb
# The build expects cuDNN and NCCL beside the toolkit (as in CI's /usr/local/cuda).
RUN for f in /usr/include/cudnn*.h /usr/include/nccl*.h; do ln -sf "$f" /usr/local/cuda/include/; done \
    && for f in /usr/lib/x86_64-linux-gnu/libcudnn*.so* /usr/lib/x86_64-linux-gnu/libnccl*.so*; do \
         ln -sf "$f" /usr/local/cuda/lib64/; done
WORKDIR /src
COPY . .
ARG VERSION=unknown
RUN HYPERTRAIN_VERSION="${VERSION}" bazel build --config=gpu --experimental_convenience_symlinks=ignore \
        //runtime/cmd:hypertrain \
    && install -m 0755 "$(bazel info --config=gpu bazel-bin)/runtime/cmd/hypertrain" /hypertrain

FROM ${DEBIAN_SLIM_IMAGE}
ARG CUDA_REPO
ARG EFA_INSTALLER_VERSION=1.43.2
ARG BUILD_OFI_NCCL=0
ARG AWS_OFI_NCCL_VERSION=1.16.3
COPY images/packages/trainer-runtime-debian.txt images/packages/trainer-cuda-runtime.txt /tmp/
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl \
    && curl -fsSLo /tmp/cuda-keyring.deb "${CUDA_REPO}/cuda-keyring_1.1-1_all.deb" \
    && dpkg -i /tmp/cuda-keyring.deb && apt-get update \
    && grep -hv '^#' /tmp/trainer-runtime-debian.txt /tmp/trainer-cuda-runtime.txt \
       | xargs env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    && rm -rf /var/lib/apt/lists/* /tmp/cuda-keyring.deb
# EFA user space (no kernel module in a container; the node's driver and the
# EFA device plugin expose /dev/infiniband/uverbs*): libfabric with the efa
# provider, rdma-core and, from installer 1.39 on, aws-ofi-nccl in /opt/amazon/ofi-nccl.
RUN cd /tmp \
    && curl -fsSLO "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
    && tar -xzf "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" && cd aws-efa-installer \
    && ./efa_installer.sh -y -g --skip-kmod --skip-limit-conf --no-verify \
    && cd / && rm -rf /tmp/aws-efa-installer* /var/lib/apt/lists/*
# Fallback: aws-ofi-nccl from source, for the AWS platform (topology files,
# EFA-specific protocol selection) with hwloc.
RUN if [ "${BUILD_OFI_NCCL}" = "1" ]; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
           build-essential autoconf automake libtool libhwloc-dev libnccl-dev=2.28.9-1+cuda13.0 cuda-cudart-dev-13-0 \
      && cd /tmp \
      && curl -fsSLO "https://github.com/aws/aws-ofi-nccl/releases/download/v${AWS_OFI_NCCL_VERSION}/aws-ofi-nccl-${AWS_OFI_NCCL_VERSION}.tar.gz" \
      && tar -xzf "aws-ofi-nccl-${AWS_OFI_NCCL_VERSION}.tar.gz" && cd "aws-ofi-nccl-${AWS_OFI_NCCL_VERSION}" \
      && ./configure --prefix=/opt/amazon/ofi-nccl --enable-platform-aws --with-libfabric=/opt/amazon/efa \
           --with-cuda=/usr/local/cuda --with-hwloc=/usr \
      && make -j"$(nproc)" install \
      && cd / && rm -rf /tmp/aws-ofi-nccl* /var/lib/apt/lists/*; \
    fi
# NCCL finds the plugin (libnccl-net.so) through the loader path.
ENV LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:/usr/local/cuda/lib64 \
    PATH=/opt/amazon/efa/bin:/usr/local/bin:/usr/bin:/bin
COPY --from=build /hypertrain /usr/local/bin/hypertrain
RUN groupadd --gid 1000 hypertrain && useradd --uid 1000 --gid 1000 --create-home hypertrain \
    && hypertrain --version
USER 1000:1000
WORKDIR /home/hypertrain
# The operator's default command is `hypertrain launch -- train` (ranks and
# config from the pod env, contract/env.h).
CMD ["hypertrain", "--help"]
