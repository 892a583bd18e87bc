# hypertrain operator image.
#   docker build -f images/operator.Dockerfile -t hypertrain/operator:0.1.0 .
# Build stage: the same Debian 12 toolchain as CI (tools/setup.sh); runtime
# stage: Debian slim with only the shared libraries the binary links, running
# as the non-root user 65532 (the Helm chart also sets readOnlyRootFilesystem:
# the operator writes nothing to disk).
FROM debian:12 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bazel-bootstrap g++ libcpprest-dev libboost-dev libyaml-cpp-dev libssl-dev libspdlog-dev \
      libfmt-dev nlohmann-json3-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The operator does not need CUDA; the WORKSPACE's CUDA stubs are not built
# for this target.
RUN bazel build --experimental_convenience_symlinks=ignore //operator/cmd:hypertrain-operator \
    && cp "$(bazel info bazel-bin)/operator/cmd/hypertrain-operator" /hypertrain-operator

FROM debian:12-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcpprest2.10 libyaml-cpp0.7 libssl3 libspdlog1.10 libfmt9 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /hypertrain-operator /usr/local/bin/hypertrain-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/hypertrain-operator"]
