#!/usr/bin/env bash
# Builds and pushes the operator and trainer images:
#   tools/build-images.sh REGISTRY TAG [--no-push]
#   -> REGISTRY/hypertrain-operator:TAG and REGISTRY/hypertrain:TAG
# with docker (buildx or the classic builder) or, without docker, buildah.
# Needs network access (Debian, NVIDIA's CUDA repository, the EFA installer).
# The images' version (--version) is this tree's `git describe`. Then install
# the chart with --set image.repository=REGISTRY/hypertrain-operator,image.tag=TAG
# and set spec.image: REGISTRY/hypertrain:TAG in TrainingJobs (docs/USER_GUIDE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: tools/build-images.sh REGISTRY TAG [--no-push]" >&2; exit 2; }
[ $# -ge 2 ] || usage
registry=${1%/}
tag=$2
push=1
if [ $# -eq 3 ] && [ "$3" = "--no-push" ]; then push=0; elif [ $# -ne 2 ]; then usage; fi
[[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || { echo "build-images: '$tag' is not a valid image tag" >&2; exit 2; }
version=$(tools/workspace_status.sh | sed -n 's/^STABLE_HYPERTRAIN_VERSION //p')

if command -v docker >/dev/null 2>&1; then
  build() { docker build -f "$1" --build-arg VERSION="$version" -t "$2" .; }
  push_image() { docker push "$1"; }
elif command -v buildah >/dev/null 2>&1; then
  build() { buildah bud -f "$1" --build-arg VERSION="$version" -t "$2" .; }
  push_image() { buildah push "$1"; }
else
  echo "build-images: neither docker nor buildah is installed" >&2
  exit 1
fi

for image in operator:hypertrain-operator trainer:hypertrain; do
  dockerfile="images/${image%%:*}.Dockerfile"
  ref="$registry/${image#*:}:$tag"
  echo "build-images: building $ref from $dockerfile (version $version)" >&2
  build "$dockerfile" "$ref"
  if [ "$push" = 1 ]; then
    echo "build-images: pushing $ref" >&2
    push_image "$ref"
  fi
done
echo "build-images: done. helm install hypertrain charts/hypertrain-operator --set image.repository=$registry/hypertrain-operator --set image.tag=$tag" >&2
