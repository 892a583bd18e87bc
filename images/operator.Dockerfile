# hypertrain operator image: //operator/cmd:hypertrain-operator on an empty
# (distroless-style) root filesystem: the binary, the shared libraries it loads,
# CA certificates and a passwd file naming user 65532 — no shell, no package
# manager. Runs as 65532 with a read-only root filesystem (the chart sets it;
# the operator writes nothing to disk).
#   tools/build-images.sh REGISTRY TAG      (builds and pushes both images)
#   docker build -f images/operator.Dockerfile --build-arg VERSION=$(git describe --tags --always --dirty) -t REGISTRY/hypertrain-operator:TAG .
# The build stage is the Debian 12 toolchain CI uses (images/packages/build-debian.txt).
FROM debian:12 AS build
COPY images/packages/build-debian.txt /tmp/packages.txt
RUN apt-get update \
    && grep -v '^#' /tmp/packages.txt | xargs env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The version --version prints (tools/workspace_status.sh; .git is not in the build context).
ARG VERSION=unknown
# --config=gpu links our own libraries statically: one binary plus system libraries.
RUN HYPERTRAIN_VERSION="${VERSION}" bazel build --config=gpu --experimental_convenience_symlinks=ignore \
        //operator/cmd:hypertrain-operator \
    && images/rootfs.sh "$(bazel info --config=gpu bazel-bin)/operator/cmd/hypertrain-operator" /rootfs \
    && chroot --userspec=65532:65532 /rootfs /usr/local/bin/hypertrain-operator --version

FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/hypertrain-operator"]
