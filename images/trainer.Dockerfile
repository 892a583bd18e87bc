# hypertrain trainer image: the `hypertrain` binary (launch + train) on a CUDA
# runtime with NCCL, the EFA user-space stack (libfabric) and the aws-ofi-nccl
# plugin, for ml.p4d/p5/p5en (GPUDirect RDMA over EFA) and ml.g5 (EFA, no RDMA).
#   docker build -f images/trainer.Dockerfile -t hypertrain:0.1.0 .
#
# Version floor for p5 (AWS guidance): CUDA >= 12, NCCL >= 2.18,
# aws-ofi-nccl >= 1.7.2, EFA installer >= 1.29. Recent EFA installers ship
# aws-ofi-nccl themselves (/opt/amazon/ofi-nccl); with an older installer set
# BUILD_OFI_NCCL=1 to build the plugin from its release tarball.
ARG CUDA_IMAGE_TAG=12.8.1-cudnn-devel-ubuntu22.04
ARG CUDA_RUNTIME_TAG=12.8.1-cudnn-runtime-ubuntu22.04

FROM nvidia/cuda:${CUDA_IMAGE_TAG} AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bazel-bootstrap g++ libcpprest-dev libboost-dev libyaml-cpp-dev libssl-dev libspdlog-dev \
      libfmt-dev libgtest-dev libgmock-dev libgloo-dev libopenblas-dev nlohmann-json3-dev \
      libnccl2 libnccl-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN bazel build --experimental_convenience_symlinks=ignore //runtime/cmd:hypertrain \
    && cp "$(bazel info bazel-bin)/runtime/cmd/hypertrain" /hypertrain

FROM nvidia/cuda:${CUDA_RUNTIME_TAG}
ARG EFA_INSTALLER_VERSION=1.38.0
ARG BUILD_OFI_NCCL=0
ARG AWS_OFI_NCCL_VERSION=1.13.2-aws
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      curl ca-certificates libnccl2 libcpprest2.10 libyaml-cpp0.7 libspdlog1.10 libfmt9 \
      libgloo0 libopenblas0 libhwloc15 pciutils environment-modules \
    && rm -rf /var/lib/apt/lists/*
# EFA user space only (no kernel module in a container): libfabric with the efa
# provider, rdma-core. The host's EFA device plugin exposes the devices.
RUN cd /tmp && curl -fsSLO https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz \
    && tar -xzf aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz && cd aws-efa-installer \
    && ./efa_installer.sh -y -g -d --skip-kmod --skip-limit-conf --no-verify \
    && cd / && rm -rf /tmp/aws-efa-installer*
# Optional: build aws-ofi-nccl (NCCL's libfabric network plugin) from source.
RUN if [ "$BUILD_OFI_NCCL" = "1" ]; then \
      apt-get update && apt-get install -y --no-install-recommends build-essential libnccl-dev cuda-nvcc-12-8 \
      && cd /tmp && curl -fsSLO https://github.com/aws/aws-ofi-nccl/releases/download/v${AWS_OFI_NCCL_VERSION}/aws-ofi-nccl-${AWS_OFI_NCCL_VERSION}.tar.gz \
      && tar -xzf aws-ofi-nccl-${AWS_OFI_NCCL_VERSION}.tar.gz && cd aws-ofi-nccl-${AWS_OFI_NCCL_VERSION} \
      && ./configure --prefix=/opt/amazon/ofi-nccl --with-libfabric=/opt/amazon/efa --with-cuda=/usr/local/cuda \
      && make -j"$(nproc)" install && cd / && rm -rf /tmp/aws-ofi-nccl* /var/lib/apt/lists/*; \
    fi
ENV LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:${LD_LIBRARY_PATH} \
    PATH=/opt/amazon/efa/bin:${PATH}
COPY --from=build /hypertrain /usr/local/bin/hypertrain
# The operator's default command: hypertrain launch -- train (the rank count and
# the config path come from the pod env, contract/env.h)
ENTRYPOINT []
CMD ["hypertrain", "--help"]
